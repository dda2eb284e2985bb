import Foundation

/// Runs blocking C calls (`rd_kafka_flush`, synchronous commits, `rd_kafka_consumer_close`) on a
/// thread of their own so that they never occupy a thread of Swift's cooperative pool.
enum BlockingCall {
    static func run<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: body())
            }
            thread.name = name
            thread.start()
        }
    }
}
