import Foundation

@testable import Kafka

/// Runs CPU-heavy synchronous test work (fuzz loops, corpora) and child processes on a thread of its own. Swift
/// Testing runs every test at once on the cooperative pool, which has one thread per core here: two such loops
/// holding both threads for half a minute starved every in-process HTTP server (the simulator, the gateway) of the
/// other tests until their requests timed out. Expectations stay in the test, on what the body returns.
enum OffPool {
    /// The Kafka layer's `BlockingCall` (a thread per call, its result handed back through a continuation).
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingCall.run(name: "test-off-pool", body)
    }
}
