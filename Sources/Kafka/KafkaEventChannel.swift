import Dispatch
import Synchronization

/// The bounded hand-over from the consumer's poll thread to its single async reader.
///
/// The poll thread blocks in `push` while `capacity` events wait unread (it does not poll
/// meanwhile, so librdkafka's own prefetch limits apply and Swift never buffers without bound). The
/// reader suspends in `next()` while nothing waits.
final class KafkaEventChannel: Sendable {
    private struct State {
        var buffer: [KafkaConsumerEvent] = []
        var head = 0
        var reader: CheckedContinuation<KafkaConsumerEvent?, any Error>?
        /// nil while open; `.success` after a clean finish, `.failure` after a fatal error.
        var completion: Result<Void, KafkaError>?

        var count: Int { buffer.count - head }

        mutating func popFirst() -> KafkaConsumerEvent? {
            guard head < buffer.count else { return nil }
            let event = buffer[head]
            head += 1
            if head > 64 && head * 2 > buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return event
        }
    }

    private let state = Mutex(State())
    /// One permit per free place in the buffer.
    private let freeSlots: DispatchSemaphore
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        // Created at 0 and raised: libdispatch traps when a semaphore is freed below its initial
        // value, which is what a channel dropped with unread events would do.
        self.freeSlots = DispatchSemaphore(value: 0)
        for _ in 0..<self.capacity { freeSlots.signal() }
    }

    /// Blocks the calling (poll) thread until there is room, unless `stop` is set first.
    /// Returns false when the event was not delivered (stopping or finished).
    @discardableResult
    func push(_ event: KafkaConsumerEvent, unless stop: StopFlag) -> Bool {
        while freeSlots.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if stop.isSet { return false }
        }
        let reader = state.withLock { state -> CheckedContinuation<KafkaConsumerEvent?, any Error>?? in
            if state.completion != nil { return .some(nil) }
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            state.buffer.append(event)
            return nil
        }
        switch reader {
        case .some(.some(let reader)):
            freeSlots.signal()
            reader.resume(returning: event)
            return true
        case .some(.none):
            freeSlots.signal()
            return false
        case .none:
            return true
        }
    }

    /// Drops buffered messages of the given partitions (they were revoked: another member will
    /// read them again from the committed offsets).
    func discardMessages(of partitions: Set<KafkaTopicPartition>) {
        let dropped = state.withLock { state -> Int in
            let before = state.count
            let kept = state.buffer[state.head...].filter { event in
                if case .message(let message) = event { return !partitions.contains(message.topicPartition) }
                return true
            }
            state.buffer = Array(kept)
            state.head = 0
            return before - kept.count
        }
        for _ in 0..<dropped { freeSlots.signal() }
    }

    /// Ends the stream: the reader gets what is buffered, then nil (or the error).
    func finish(_ error: KafkaError? = nil) {
        let reader = state.withLock { state -> CheckedContinuation<KafkaConsumerEvent?, any Error>? in
            guard state.completion == nil else { return nil }
            state.completion = error.map { .failure($0) } ?? .success(())
            defer { state.reader = nil }
            return state.reader
        }
        if let reader {
            if let error { reader.resume(throwing: error) } else { reader.resume(returning: nil) }
        }
    }

    func next() async throws -> KafkaConsumerEvent? {
        // An event already buffered is taken without a continuation or a cancellation handler: in a burst the
        // reader finds one waiting nearly every time, and those two were a visible share of each message's cost.
        if let event = takeBuffered() { return event }
        return try await withTaskCancellationHandler {
            try await waitForNext()
        } onCancel: {
            let reader = state.withLock { state -> CheckedContinuation<KafkaConsumerEvent?, any Error>? in
                defer { state.reader = nil }
                return state.reader
            }
            reader?.resume(throwing: CancellationError())
        }
    }

    private func takeBuffered() -> KafkaConsumerEvent? {
        guard let event = state.withLock({ $0.popFirst() }) else { return nil }
        freeSlots.signal()
        return event
    }

    private func waitForNext() async throws -> KafkaConsumerEvent? {
        try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<KafkaConsumerEvent?, any Error>) in
            enum Immediate {
                case event(KafkaConsumerEvent)
                case end(Result<Void, KafkaError>)
                case concurrentReader
                case cancelled
                case wait
            }
            let immediate = state.withLock { state -> Immediate in
                if let event = state.popFirst() { return .event(event) }
                if let completion = state.completion { return .end(completion) }
                if state.reader != nil { return .concurrentReader }
                if Task.isCancelled { return .cancelled }
                state.reader = continuation
                return .wait
            }
            switch immediate {
            case .event(let event):
                freeSlots.signal()
                continuation.resume(returning: event)
            case .end(.success):
                continuation.resume(returning: nil)
            case .end(.failure(let error)):
                continuation.resume(throwing: error)
            case .concurrentReader:
                continuation.resume(
                    throwing: KafkaError(
                        code: .state, message: "the consumer's events have one reader only", isRetryable: false))
            case .cancelled:
                continuation.resume(throwing: CancellationError())
            case .wait:
                break
            }
        }
    }
}

/// Partitions being taken away from this member, handed to `KafkaConsumer.RevokeHook`.
public struct KafkaRevocation: Sendable {
    /// The partitions revoked (eager: the whole assignment).
    public var partitions: [KafkaTopicPartition]
    /// The number of the assignment they belonged to, as announced by
    /// `KafkaConsumerEvent.partitionsAssigned`.
    public var generation: UInt64
}

/// What the consumer delivers, in the order it happened.
public enum KafkaConsumerEvent: Sendable {
    /// A message from an assigned, unpaused partition.
    case message(KafkaConsumerMessage)
    /// The group gave this member these partitions (eager: the complete new assignment).
    /// Reading starts at each partition's committed offset, given in `startingOffsets` (a partition
    /// without a commit starts at `auto.offset.reset` and is not in it). `startsUnknown` names the
    /// partitions whose committed offset could not be read (the lookup was tried a few times; librdkafka
    /// reads it on its own): read it later (`KafkaConsumer.committedOffsets`) before trusting where they
    /// start. `generation` numbers this member's assignments from 1; the revoke hook is told the
    /// number of the assignment it takes away (`KafkaRevocation.generation`).
    case partitionsAssigned(
        [KafkaTopicPartition], startingOffsets: [KafkaTopicPartition: Int64], startsUnknown: Set<KafkaTopicPartition>,
        generation: UInt64)
    /// These partitions were taken away; the revoke hook has already run. Buffered messages of
    /// them were dropped.
    case partitionsRevoked([KafkaTopicPartition])
    /// The partition was sought back to `offset` at the reader's request (`KafkaConsumer.rewind`):
    /// its messages from here on are read from there.
    case rewound(KafkaTopicPartition, offset: Int64)
}

/// The consumer's events as an `AsyncSequence` with a single reader. It finishes when the consumer
/// is closed, and throws a fatal `KafkaError` if the client fails for good.
public struct KafkaConsumerEvents: AsyncSequence, Sendable {
    public typealias Element = KafkaConsumerEvent
    let channel: KafkaEventChannel

    public struct AsyncIterator: AsyncIteratorProtocol {
        let channel: KafkaEventChannel
        public mutating func next() async throws -> KafkaConsumerEvent? {
            try await channel.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }
}
