import CCurlShim
import Glibc
import Testing

@testable import AppleClients
@testable import StoreHTTP

@Suite("Apple clients: curl event set (parked idle sockets)")
struct AppleClientsEventSetTests {
    /// A connected pair of Unix stream sockets, closed at the end.
    private func withSocketPair(_ body: (Int32, Int32) throws -> Void) throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer {
            close(pair[0])
            close(pair[1])
        }
        try body(pair[0], pair[1])
    }

    private func readySockets(_ events: CurlEventSet) -> [Int32] {
        events.wait(timeoutMilliseconds: 0).map { $0.data.fd }.filter { $0 != events.wakeUpDescriptor }
    }

    @Test("A socket libcurl stops watching for reading is parked, still reported, and removed on request")
    func parkedSocketIsReportedUntilRemoved() throws {
        let events = try CurlEventSet()
        defer { events.close() }
        try withSocketPair { mine, peer in
            events.watch(mine, readable: true, writable: false)
            events.forget(mine)
            #expect(events.isParked(mine))
            #expect(readySockets(events).isEmpty)  // idle: nothing to read

            var byte: UInt8 = 1
            #expect(write(peer, &byte, 1) == 1)
            #expect(readySockets(events) == [mine])  // the loop sees it and removes it
            events.remove(mine)
            #expect(!events.isParked(mine))
            #expect(readySockets(events).isEmpty)
        }
    }

    @Test("Watching a parked socket again unparks it; a socket watched for writing is removed, not parked")
    func unparkAndWritable() throws {
        let events = try CurlEventSet()
        defer { events.close() }
        try withSocketPair { mine, _ in
            events.watch(mine, readable: true, writable: false)
            events.forget(mine)
            events.watch(mine, readable: true, writable: true)
            #expect(!events.isParked(mine))
            #expect(readySockets(events) == [mine])  // writable

            events.forget(mine)
            #expect(!events.isParked(mine))
            #expect(readySockets(events).isEmpty)
        }
    }
}
