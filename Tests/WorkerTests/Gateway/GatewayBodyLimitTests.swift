import Foundation
import Gateway
import Testing

@Suite("Gateway: body limits", .timeLimit(.minutes(2)))
struct GatewayBodyLimitTests {
    @Test("a body without Content-Length (chunked) over the limit is 413, not 400")
    func chunkedTooLarge() async throws {
        try await GatewayTestHarness.with { configuration in
            configuration.maximumBodyBytes = 4_096
        } _: { harness in
            let body = #"{"account_id":"a","receipt":""# + String(repeating: "A", count: 10_000) + #""}"#
            let reply = try await GatewayRawHTTP.postChunked(
                port: harness.port, path: "/v1/receipts", body: Array(body.utf8),
                headers: ["Content-Type: application/json", "Authorization: Bearer \(GatewayTestHarness.token)"])
            #expect(reply.hasPrefix("HTTP/1.1 413"), "\(reply.prefix(200))")
            #expect(reply.contains(#""error":"too_large""#))
        }
    }
}

/// A request written by hand on a socket, for what the curl engine does not send (a chunked body, a HEAD).
enum GatewayRawHTTP {
    static func postChunked(port: Int, path: String, body: [UInt8], headers: [String]) async throws -> String {
        var request = Array("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n".utf8)
        for header in headers { request += Array("\(header)\r\n".utf8) }
        request += Array("Connection: close\r\n\r\n".utf8)
        var offset = 0
        while offset < body.count {
            let chunk = body[offset..<min(offset + 1_000, body.count)]
            request += Array(String(chunk.count, radix: 16).utf8) + [13, 10] + chunk + [13, 10]
            offset += chunk.count
        }
        request += Array("0\r\n\r\n".utf8)
        return try await OffPool.run { [request] in try exchange(port: port, request) }
    }

    /// The whole answer (status line, headers, body) to a request without a body, e.g. `HEAD /healthz`.
    static func request(_ method: String, port: Int, path: String) async throws -> String {
        let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        return try await OffPool.run { try exchange(port: port, request) }
    }

    /// Sends `request` and reads until the server closes the connection.
    private static func exchange(port: Int, _ request: [UInt8]) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw GatewayTestFailure("socket() failed") }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { throw GatewayTestFailure("connect() to 127.0.0.1:\(port) failed") }
        // The server may answer and close before it read everything: a failed write is not the test's failure.
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            answer += buffer[0..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}
