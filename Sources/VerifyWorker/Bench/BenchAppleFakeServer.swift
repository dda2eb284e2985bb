import Foundation
import Hummingbird
import Logging
import Synchronization

/// A minimal verifyReceipt look-alike for `bench apple` when no `--url` is given: every POST to
/// `/verifyReceipt` or `/sandbox/verifyReceipt` gets a status-0 answer after a fixed delay.
/// (Stands in until the Apple simulator is wired into the bench.)
final class BenchAppleFakeServer: Sendable {
    private let latency: Duration
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(latency: Duration) {
        self.latency = latency
    }

    func start() async throws -> Int {
        let body = ByteBuffer(
            string: #"{"status":0,"environment":"Production","receipt":{"bundle_id":"com.example.bench","in_app":[{"#
                + #""product_id":"com.example.bench.monthly","transaction_id":"1000000000000001","#
                + #""original_transaction_id":"1000000000000001","purchase_date_ms":"1700000000000","quantity":"1"}]}}"#
        )
        let latency = self.latency
        var logger = Logger(label: "bench-apple-fake")
        logger.logLevel = .critical
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            responder: CallbackResponder<BasicRequestContext> { request, _ in
                var request = request
                _ = try await request.collectBody(upTo: 1 << 20)
                if latency > .zero { try await Task.sleep(for: latency) }
                var headers = HTTPFields()
                headers[.contentType] = "application/json"
                return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: body))
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0), backlog: 4096),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger)
        let running = Task {
            try? await app.run()
            portContinuation.finish()
        }
        task.withLock { $0 = running }
        for await port in ports where port > 0 { return port }
        throw BenchAppleFakeServerError()
    }

    func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        await running?.value
    }
}

/// The in-process fake could not listen.
struct BenchAppleFakeServerError: Error, CustomStringConvertible {
    var description: String { "the in-process fake Apple server could not bind 127.0.0.1" }
}
