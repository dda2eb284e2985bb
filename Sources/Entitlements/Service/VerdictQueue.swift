import Kafka
import Synchronization

/// The hand-over between the consumer's event stream and the projector: the pump puts messages in, the projector
/// takes whatever is there (up to a batch) in one go, so a batch forms from what has arrived without waiting for a
/// timer. Bounded: the pump waits while `capacity` messages are queued, so the consumer's own bounded buffer and
/// librdkafka's prefetch limit hold the rest.
final class VerdictQueue: Sendable {
    private struct State {
        var messages: [KafkaConsumerMessage] = []
        var head = 0
        var taker: CheckedContinuation<Void, Never>?
        var putters: [CheckedContinuation<Void, Never>] = []
        var finished = false
        var count: Int { messages.count - head }
    }

    private let state = Mutex(State())
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Adds a message, waiting while the queue is full.
    func put(_ message: KafkaConsumerMessage) async {
        while true {
            let full = state.withLock { state -> Bool in state.count >= capacity && !state.finished }
            if !full { break }
            await withCheckedContinuation { continuation in
                let wait = state.withLock { state -> Bool in
                    guard state.count >= capacity, !state.finished else { return false }
                    state.putters.append(continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
        }
        let taker = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.messages.append(message)
            defer { state.taker = nil }
            return state.taker
        }
        taker?.resume()
    }

    /// Takes up to `maximumCount` messages, waiting for at least one; empty once finished (or when the task is
    /// cancelled).
    func take(maximumCount: Int) async -> [KafkaConsumerMessage] {
        while true {
            let (batch, done) = state.withLock { state -> ([KafkaConsumerMessage], Bool) in
                let end = min(state.messages.count, state.head + maximumCount)
                let batch = Array(state.messages[state.head..<end])
                state.head = end
                if state.head > 1024 && state.head * 2 > state.messages.count {
                    state.messages.removeFirst(state.head)
                    state.head = 0
                }
                return (batch, state.finished)
            }
            if !batch.isEmpty {
                wakePutters()
                return batch
            }
            if done || Task.isCancelled { return [] }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let wait = state.withLock { state -> Bool in
                        guard state.count == 0, !state.finished, !Task.isCancelled else { return false }
                        state.taker = continuation
                        return true
                    }
                    if !wait { continuation.resume() }
                }
            } onCancel: {
                let taker = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.taker = nil }
                    return state.taker
                }
                taker?.resume()
            }
        }
    }

    /// Drops queued messages of these partitions (revoked: their next owner reads them from the committed offset).
    func discard(_ partitions: Set<KafkaTopicPartition>) {
        state.withLock { state in
            state.messages = state.messages[state.head...].filter { !partitions.contains($0.topicPartition) }
            state.head = 0
        }
        wakePutters()
    }

    /// Ends the queue: the taker gets what is left, then empty batches.
    func finish() {
        let (taker, putters) = state.withLock { state in
            state.finished = true
            defer {
                state.taker = nil
                state.putters = []
            }
            return (state.taker, state.putters)
        }
        taker?.resume()
        putters.forEach { $0.resume() }
    }

    private func wakePutters() {
        let putters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.count < capacity else { return [] }
            defer { state.putters = [] }
            return state.putters
        }
        putters.forEach { $0.resume() }
    }
}
