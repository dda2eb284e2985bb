import Foundation

/// Runs blocking calls (`rd_kafka_flush`, synchronous commits, `rd_kafka_consumer_close`; a child process waited
/// for) on a thread of their own so that they never occupy a thread of Swift's cooperative pool, which has one thread
/// per core.
public enum BlockingCall {
    public static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: body())
            }
            thread.name = name
            thread.start()
        }
    }

    /// The same for a body that throws: its error is carried across.
    public static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await run(name: name) { Result { try body() } }.get()
    }
}
