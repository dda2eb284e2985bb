import AppleClients
import Foundation
import Testing

@testable import Traffic

@Suite("Apple clients: wrk load report")
struct AppleClientsWrkLoadTests {
    private let load = WrkLoad(
        executable: URL(fileURLWithPath: "/usr/bin/wrk"), url: "http://127.0.0.1:1/verifyReceipt", body: [],
        connections: 64, threads: 2, durationSeconds: 10)

    @Test("wrk's rate line and the script's summary lines are read")
    func parsesSummary() throws {
        let output = """
            Running 10s test @ http://127.0.0.1:4242/verifyReceipt
              2 threads and 64 connections
              Thread Stats   Avg      Stdev     Max   +/- Stdev
                Latency     2.61ms    2.15ms  40.11ms   89.51%
            245798 requests in 10.07s, 1.60GB read
            Requests/sec:  24405.17
            Transfer/sec:    162.55MB
            requests=245798 non200=3 not_status0=2 errors=1
            p50_us=2210 p99_us=12970
            """
        let report = try load.parse(output)
        #expect(report.requests == 245_798)
        #expect(report.requestsPerSecond == 24_405.17)
        #expect(report.latencyP50Ms == 2.21)
        #expect(report.latencyP99Ms == 12.97)
        #expect(report.non200 == 3)
        #expect(report.notStatus0 == 2)
        #expect(report.socketErrors == 1)
    }

    @Test("Output without a summary is an error, not a zero rate")
    func missingSummary() {
        #expect(throws: WrkLoad.Failure.self) { try load.parse("unable to connect to 127.0.0.1:1 Connection refused") }
    }
}
