import Foundation

/// Runs CPU-heavy synchronous test work (fuzz loops, corpora) on a thread of its own. Swift Testing runs every test
/// at once on the cooperative pool, which has one thread per core here: two such loops holding both threads for
/// half a minute starved every in-process HTTP server (the simulator, the gateway) of the other tests until their
/// requests timed out. Expectations stay in the test, on what the body returns.
enum OffPool {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try body() }) }
            thread.name = "test-off-pool"
            thread.start()
        }
    }
}
