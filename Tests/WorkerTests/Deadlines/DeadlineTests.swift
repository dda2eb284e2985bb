import Deadlines
import Synchronization
import Testing

/// The one deadline helper: `withDeadline` cancels what it gave up on; `waitWithin` (the gateway's wait for Kafka)
/// leaves it running and drops its late result.
@Suite("Deadlines: one race of an operation against its deadline", .timeLimit(.minutes(2)))
struct DeadlineTests {
    /// An operation that ends only when released, and tells whether it saw cancellation.
    final class Held: Sendable {
        private let released = Mutex<CheckedContinuation<Void, Never>?>(nil)
        private let isStarted = Mutex(false)
        let ended = AsyncStream<Bool>.makeStream()
        /// Told when the task running ``run()`` is cancelled.
        let cancelled = AsyncStream<Void>.makeStream()

        func run() async -> Int {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    released.withLock { $0 = continuation }
                    isStarted.withLock { $0 = true }
                }
            } onCancel: {
                cancelled.continuation.yield(())
            }
            ended.continuation.yield(Task.isCancelled)
            return 7
        }

        var started: Bool { isStarted.withLock { $0 } }

        func release() {
            released.withLock { $0.take() }?.resume()
        }
    }

    struct Late: Error {}

    @Test("waitWithin: the deadline answers, the operation goes on uncancelled, its late result is dropped")
    func waitWithinLeavesTheOperation() async throws {
        let held = Held()
        let outcome = await waitWithin(.milliseconds(20)) { await held.run() }
        guard case .timedOut = outcome else {
            Issue.record("expected the deadline, got \(outcome)")
            return
        }
        while !held.started { await Task.yield() }
        held.release()
        var ended = held.ended.stream.makeAsyncIterator()
        #expect(await ended.next() == false, "not cancelled")
    }

    @Test("waitWithin: the operation's value or error when it ends first")
    func waitWithinValue() async {
        guard case .value(7) = await waitWithin(.seconds(60), { 7 }) else {
            Issue.record("expected the value")
            return
        }
        guard case .failure(let error) = await waitWithin(.seconds(60), { () async throws -> Int in throw Late() }),
            error is Late
        else {
            Issue.record("expected the error")
            return
        }
    }

    @Test("withDeadline: the timeout's error, and the operation cancelled")
    func withDeadlineCancels() async throws {
        let held = Held()
        await #expect(throws: Late.self) {
            try await withDeadline(.milliseconds(20), onTimeout: { Late() }) { await held.run() }
        }
        // The timeout answers the caller first and cancels the operation right after: awaited, not assumed.
        var cancelled = held.cancelled.stream.makeAsyncIterator()
        _ = await cancelled.next()
        while !held.started { await Task.yield() }
        held.release()
        var ended = held.ended.stream.makeAsyncIterator()
        #expect(await ended.next() == true, "cancelled")
    }
}
