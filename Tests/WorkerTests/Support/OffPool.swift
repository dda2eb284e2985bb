import Foundation
import Kafka

/// Runs CPU-heavy synchronous test work (fuzz loops, corpora) and child processes on a thread of its own. Swift
/// Testing runs every test at once on the cooperative pool, which has one thread per core here: two such loops
/// holding both threads for half a minute starved every in-process HTTP server (the simulator, the gateway) of the
/// other tests until their requests timed out. Expectations stay in the test, on what the body returns.
///
/// The thread keeps the normal priority, not nice 19: a thread that rarely gets a core
/// can hold a lock the whole process needs (the allocator's, the Swift runtime's metadata caches) for seconds, and a
/// fresh-clone CI run then had three tests stall. Bodies that time their work measure the thread's CPU time.
enum OffPool {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingCall.run(name: "test-off-pool", body)
    }
}
