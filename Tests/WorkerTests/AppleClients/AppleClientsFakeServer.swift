import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// A scripted HTTP server for the Apple client tests, standing in for Apple until the simulator is merged:
/// a queue of canned replies per path (then a fallback), optional delay, and replies that drop the connection.
final class AppleClientsFakeServer: Sendable {
    /// One canned reply.
    struct Reply: Sendable {
        var status: Int = 200
        var headers: [String: String] = [:]
        var body: [UInt8] = []
        var delay: Duration? = nil
        /// Send the headers and part of the body, then close the connection.
        var dropConnection = false

        static func json(_ text: String, status: Int = 200, headers: [String: String] = [:]) -> Reply {
            var all = headers
            all["Content-Type"] = "application/json"
            return Reply(status: status, headers: all, body: Array(text.utf8))
        }

        /// A verifyReceipt answer with just a status (and a minimal receipt for the authentic ones).
        static func receiptStatus(_ status: Int, extra: String = "") -> Reply {
            let receipt =
                status == 0 || status == 21006
                ? #","receipt":{"bundle_id":"com.example","in_app":[]}"# : ""
            return .json(#"{"status":\#(status)\#(receipt)\#(extra)}"#)
        }
    }

    /// One request as the server saw it.
    struct Received: Sendable {
        var method: String
        var path: String
        var query: String
        /// Header names in lower case.
        var headers: [String: String]
        var body: [UInt8]

        var jsonBody: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        }
    }

    private struct State {
        var queues: [String: [Reply]] = [:]
        var fallbacks: [String: Reply] = [:]
        var received: [Received] = []
        var arrivalWaiters: [CheckedContinuation<Received, Never>] = []
    }

    private let state = Mutex(State())
    private let runningTask = Mutex<Task<Void, Never>?>(nil)

    /// Replies to `path`, in order, before its fallback is used.
    func enqueue(_ path: String, _ replies: Reply...) {
        state.withLock { $0.queues[path, default: []].append(contentsOf: replies) }
    }

    /// The reply to `path` once its queue is empty (404 when none is set).
    func setFallback(_ path: String, _ reply: Reply) {
        state.withLock { $0.fallbacks[path] = reply }
    }

    /// Requests received so far, optionally for one path only.
    func received(path: String? = nil) -> [Received] {
        state.withLock { state in state.received.filter { path == nil || $0.path == path } }
    }

    /// Waits for the next request to arrive.
    func nextArrival() async -> Received {
        await withCheckedContinuation { continuation in
            state.withLock { $0.arrivalWaiters.append(continuation) }
        }
    }

    /// Starts listening on 127.0.0.1 (`port` 0 picks a free port) and returns the port once bound.
    func start(port: Int = 0) async throws -> Int {
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "apple-clients-fake-server")
        logger.logLevel = .critical
        let app = Application(
            responder: CallbackResponder<BasicRequestContext> { request, _ in try await self.respond(to: request) },
            configuration: .init(address: .hostname("127.0.0.1", port: port), backlog: 4096),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger)
        let task = Task {
            try? await app.run()
            portContinuation.finish()
        }
        runningTask.withLock { $0 = task }
        for await bound in ports where bound > 0 { return bound }
        throw MissingResource(what: "a listening fake Apple server", hint: "could not bind 127.0.0.1:\(port)")
    }

    /// Ends the test's use of the server but leaves it listening until the test process exits.
    ///
    /// Stopping a Hummingbird server while a connection is being accepted can trip a precondition in
    /// NIOAsyncWriter ("Deinited NIOAsyncWriter without calling finish()") and crash the whole test run, so the
    /// tests do not stop servers; the kill-and-restart test uses a separate process instead.
    func retire() {
        state.withLock { state in
            state.queues.removeAll()
            state.fallbacks.removeAll()
        }
    }

    /// Stops listening and closes every connection.
    func stop() async {
        guard
            let task = runningTask.withLock({ task in
                defer { task = nil }; return task
            })
        else { return }
        task.cancel()
        await task.value
    }

    private func respond(to request: Request) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: 16 << 20)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName.lowercased()] = field.value }
        let received = Received(
            method: request.method.rawValue, path: request.uri.path, query: request.uri.query ?? "", headers: headers,
            body: Array(buffer: body))
        let (reply, waiters) = state.withLock { state -> (Reply, [CheckedContinuation<Received, Never>]) in
            state.received.append(received)
            let waiters = state.arrivalWaiters
            state.arrivalWaiters.removeAll()
            if var queue = state.queues[received.path], !queue.isEmpty {
                let reply = queue.removeFirst()
                state.queues[received.path] = queue
                return (reply, waiters)
            }
            return (state.fallbacks[received.path] ?? Reply(status: 404), waiters)
        }
        for waiter in waiters { waiter.resume(returning: received) }
        if let delay = reply.delay { try await Task.sleep(for: delay) }

        var fields = HTTPFields()
        for (name, value) in reply.headers {
            if let fieldName = HTTPField.Name(name) { fields[fieldName] = value }
        }
        let bytes = ByteBuffer(bytes: reply.body)
        if reply.dropConnection {
            // Promise more than is sent, then fail the writer: the server closes the connection mid-body.
            return Response(
                status: .ok, headers: fields,
                body: ResponseBody(contentLength: reply.body.count + 1000) { writer in
                    try await writer.write(bytes)
                    throw CancellationError()
                })
        }
        return Response(status: .init(code: reply.status), headers: fields, body: ResponseBody(byteBuffer: bytes))
    }
}

extension AppleClientsFakeServer {
    /// Starts a fake server, runs `body` with it and its base URL, and retires it however `body` ends.
    static func withRunning<T>(_ body: (AppleClientsFakeServer, String) async throws -> T) async throws -> T {
        let server = AppleClientsFakeServer()
        let port = try await server.start()
        do {
            let result = try await body(server, "http://127.0.0.1:\(port)")
            server.retire()
            return result
        } catch {
            server.retire()
            throw error
        }
    }
}
