import Foundation
import Kafka

#if canImport(Glibc)
    import Glibc
#endif

/// Runs CPU-heavy synchronous test work (fuzz loops, corpora) and child processes on a thread of its own. Swift
/// Testing runs every test at once on the cooperative pool, which has one thread per core here: two such loops
/// holding both threads for half a minute starved every in-process HTTP server (the simulator, the gateway) of the
/// other tests until their requests timed out. Expectations stay in the test, on what the body returns.
///
/// The thread runs at the lowest scheduling priority (nice 19): on two cores, a minute of debug-build fuzzing at
/// normal priority took half the machine from the tests that wait on round trips (Kafka, HTTP), and those with a
/// one-minute limit ran out of it (session 12). Bodies that time their work measure the thread's CPU time, which
/// the priority does not change.
enum OffPool {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingCall.run(name: "test-off-pool") {
            lowerPriority()
            return try body()
        }
    }

    /// Nice 19 for the calling thread alone: on Linux the nice value is a thread's, and `who` 0 names the caller.
    static func lowerPriority() {
        #if os(Linux)
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
        #endif
    }
}
