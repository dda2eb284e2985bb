import CodedErrors
import Foundation
import Kafka
import Logging
import Messages
import Metrics
import Observability
import ServiceLifecycle
import Synchronization

/// The consumer loop of `verify-worker entitlements`: reads `receipt-verdicts` in its own consumer group, projects
/// them in batches (one database transaction each), and commits a partition's offset only after the batch that
/// reached it is written, so a crash, `kill -9`, a rebalance or a database outage re-reads at worst what was not
/// yet committed, and the store's de-duplication by `verdict_id` makes the second reading change nothing.
///
/// Order: a partition's messages are applied in offset order, one batch at a time, so each account's verdicts (keyed
/// by account) are applied in the order they were published.
public final class VerdictProjector: Service, Sendable {
    public struct Configuration: Sendable {
        public var topic: String
        /// Most messages in one batch. Default: 2000.
        public var batchSize: Int
        /// Backoff after a failed batch: first wait and longest wait. Defaults: 100 ms, 5 s.
        public var retryInitial: Duration
        public var maximumRetryDelay: Duration
        /// On graceful shutdown, how long the batch in hand may take. Default: 25 s.
        public var drainTimeout: Duration
        /// Webhook URLs new events are queued for.
        public var webhookURLs: [String]
        /// Rejections each account's history keeps (``ProjectionBatch/rejectionsPerAccount``). Default: 20.
        public var rejectionsPerAccount = ProjectionBatch.defaultRejectionsPerAccount
        /// Called after each batch is written with its records' Kafka timestamps (ms) and the time of the write
        /// (benchmarks measure publication-to-visibility with it). Default: nil.
        public var onBatchWritten: (@Sendable (_ recordMilliseconds: [Int64], _ writtenAt: Date) -> Void)?

        public init(
            topic: String, batchSize: Int = 2000, retryInitial: Duration = .milliseconds(100),
            maximumRetryDelay: Duration = .seconds(5), drainTimeout: Duration = .seconds(25), webhookURLs: [String] = []
        ) {
            self.topic = topic
            self.batchSize = batchSize
            self.retryInitial = retryInitial
            self.maximumRetryDelay = maximumRetryDelay
            self.drainTimeout = drainTimeout
            self.webhookURLs = webhookURLs
        }
    }

    private struct State {
        /// A batch is being written (a revocation waits for it).
        var busy = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
        /// Next offsets written and not yet committed, per partition.
        var written: [KafkaTopicPartition: Int64] = [:]
        var assignment: Set<KafkaTopicPartition> = []
        var storeHealthy = true
        var lastError: String?
        var fatal = false
        var newestRecordTime: Date?
    }

    public let configuration: Configuration
    private let consumer: KafkaConsumer
    private let store: any EntitlementStore
    private let catalog: Catalog
    private let reader: VerdictReader
    private let queue: VerdictQueue
    private let state = Mutex(State())
    private let logger: Logger
    private let now: @Sendable () -> Date
    /// Called after each batch that created lifecycle events (wakes the event publisher).
    private let onEvents: @Sendable () -> Void

    /// - Parameter consumerConfiguration: the group member's settings; this projector installs its revoke hook.
    public init(
        configuration: Configuration, consumerConfiguration: KafkaConsumerConfiguration, store: any EntitlementStore,
        catalog: Catalog, reader: VerdictReader, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }, onEvents: @escaping @Sendable () -> Void = {}
    ) throws(KafkaError) {
        self.configuration = configuration
        self.store = store
        self.catalog = catalog
        self.reader = reader
        self.logger = logger
        self.now = now
        self.onEvents = onEvents
        let queue = VerdictQueue(capacity: max(configuration.batchSize * 2, 256))
        self.queue = queue
        let hook = RevokeHookBox()
        self.consumer = try KafkaConsumer(
            configuration: consumerConfiguration, logger: logger,
            onRevoke: { revocation in await hook.call(revocation) })
        hook.set { [weak self] revocation in await self?.revoke(revocation) }
    }

    /// Whether the projection can do its work now, with the reasons when not.
    public var health: (ready: Bool, reasons: [String]) {
        state.withLock { state in
            var reasons: [String] = []
            if !state.storeHealthy { reasons.append("store_unreachable") }
            if state.fatal { reasons.append("projection_stopped") }
            return (reasons.isEmpty, reasons)
        }
    }

    /// The partitions this member reads now.
    public var assignment: Set<KafkaTopicPartition> { state.withLock { $0.assignment } }

    public func run() async throws {
        try consumer.subscribe(topics: [configuration.topic])
        let consumer = self.consumer
        let queue = self.queue
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.pump(consumer: consumer, queue: queue) }
                do {
                    try await self.projectUntilFinished()
                } catch {
                    // Leave the group first (the revoke hook commits what was written), then report.
                    queue.finish()
                    await consumer.close()
                    throw error
                }
                // The consumer leaves its group: the revoke hook commits what was written, the events end and the
                // pump returns.
                await consumer.close()
                try await group.waitForAll()
            }
        } onGracefulShutdown: {
            // Stop taking new messages; the batch in hand finishes first.
            queue.finish()
        }
    }

    /// Moves the consumer's events into the queue, tracking the assignment.
    private func pump(consumer: KafkaConsumer, queue: VerdictQueue) async throws {
        defer { queue.finish() }
        do {
            for try await event in consumer.events {
                switch event {
                case .message(let message):
                    await queue.put(message)
                case .partitionsAssigned(let partitions, _, _, _):
                    state.withLock { $0.assignment = Set(partitions) }
                    logger.info(
                        "entitlements: partitions assigned", metadata: [LogKeys.partitions: "\(partitions.count)"])
                    if !state.withLock({ $0.storeHealthy }) { try? consumer.pause(partitions) }
                case .partitionsRevoked(let partitions):
                    state.withLock { $0.assignment.subtract(partitions) }
                case .rewound:
                    break
                }
            }
        } catch is CancellationError {
        }
    }

    /// Takes batches from the queue and writes them, until the queue is finished.
    private func projectUntilFinished() async throws {
        while true {
            let messages = await queue.take(maximumCount: configuration.batchSize)
            if messages.isEmpty { break }
            try await project(messages)
        }
        await commitWritten()
    }

    /// Writes one batch, retrying with backoff while the store fails for a reason that may pass; then commits.
    func project(_ messages: [KafkaConsumerMessage]) async throws {
        setBusy(true)
        defer { setBusy(false) }
        let assigned = state.withLock { $0.assignment }
        // Messages of a partition revoked since they were queued are left to its next owner.
        let current = messages.filter { assigned.isEmpty || assigned.contains($0.topicPartition) }
        guard !current.isEmpty else { return }
        let inputs = current.map { message in
            reader.read(message.value ?? [], position: "\(message.topic)/\(message.partition)/\(message.offset)")
        }
        var positions: [KafkaTopicPartition: TopicPosition] = [:]
        for message in current {
            let time = message.timestampMilliseconds.map { Date(epochMilliseconds: Int64($0)) }
            var position =
                positions[message.topicPartition]
                ?? TopicPosition(
                    topic: message.topic, partition: message.partition, nextOffset: message.offset + 1, recordTime: time
                )
            position.nextOffset = max(position.nextOffset, message.offset + 1)
            if let time { position.recordTime = max(position.recordTime ?? time, time) }
            positions[message.topicPartition] = position
        }
        let batch = ProjectionBatch(
            inputs: inputs, positions: Array(positions.values), webhookURLs: configuration.webhookURLs,
            rejectionsPerAccount: configuration.rejectionsPerAccount)
        var delay = configuration.retryInitial
        var paused = false
        while true {
            let started = ContinuousClock.now
            do {
                let result = try await store.project(batch, catalog: catalog, recordedAt: now())
                Timer(label: MetricNames.entitlementsBatchDuration).recordNanoseconds(
                    (ContinuousClock.now - started).nanoseconds)
                record(result, inputs: inputs)
                if paused { try? consumer.resume(Array(state.withLock { $0.assignment })) }
                break
            } catch let error as EntitlementStoreError where error.isRetryable {
                Counter(label: MetricNames.entitlementsStoreErrors, dimensions: [("error", error.code.rawValue)])
                    .increment()
                let first = state.withLock { state -> Bool in
                    defer {
                        state.storeHealthy = false
                        state.lastError = error.code.rawValue
                    }
                    return state.storeHealthy
                }
                if first {
                    logger.warning(
                        "entitlements: the store failed; retrying the batch without committing",
                        metadata: [LogKeys.error: "\(error)"])
                }
                if !paused {
                    // Stop fetching while the store is down: polling continues, so the member stays in its group.
                    try? consumer.pause(Array(state.withLock { $0.assignment }))
                    paused = true
                }
                try await Task.sleep(for: delay)
                delay = min(delay * 2, configuration.maximumRetryDelay)
            } catch {
                state.withLock { $0.fatal = true }
                logger.critical("entitlements: the projection stopped", metadata: [LogKeys.error: "\(error)"])
                throw error
            }
        }
        let recordTime = positions.values.compactMap(\.recordTime).max()
        let recovered = state.withLock { state -> Bool in
            for (partition, position) in positions { state.written[partition] = position.nextOffset }
            if let recordTime { state.newestRecordTime = max(state.newestRecordTime ?? recordTime, recordTime) }
            defer { state.storeHealthy = true }
            return !state.storeHealthy
        }
        if recovered { logger.notice("entitlements: the store answers again") }
        if let recordTime {
            Gauge(label: MetricNames.entitlementsLag).record(now().timeIntervalSince(recordTime))
        }
        configuration.onBatchWritten?(current.compactMap(\.timestampMilliseconds), Date())
        await commitWritten(async: true)
    }

    private func record(_ result: ProjectionBatchResult, inputs: [ProjectionInput]) {
        var counts: [EntitlementProjection.Result: Int] = [:]
        for item in result.results { counts[item, default: 0] += 1 }
        for (item, count) in counts {
            Counter(label: MetricNames.entitlementsVerdicts, dimensions: [("result", item.rawValue)]).increment(
                by: count)
        }
        for (input, item) in zip(inputs, result.results) where item == .ignored {
            guard case .unreadable(let message) = input else { continue }
            Counter(label: MetricNames.entitlementsIgnored, dimensions: [("code", message.code)]).increment()
            logger.notice(
                "entitlements: ignored a message that is not a verdict this build reads",
                metadata: [LogKeys.problem: "\(message.code)", LogKeys.dedupeID: "\(message.dedupeID)"])
        }
        for event in result.events {
            Counter(label: MetricNames.entitlementsEvents, dimensions: [("type", event.kind.rawValue)]).increment()
        }
        if !result.events.isEmpty { onEvents() }
    }

    /// Commits every written, uncommitted offset of the partitions still assigned.
    private func commitWritten(async: Bool = false, only partitions: Set<KafkaTopicPartition>? = nil) async {
        let offsets = state.withLock { state -> [KafkaCommitOffset] in
            let due = state.written.filter { partitions?.contains($0.key) ?? true }
            for key in due.keys { state.written[key] = nil }
            return due.map { KafkaCommitOffset(topicPartition: $0.key, offset: $0.value) }
        }
        guard !offsets.isEmpty else { return }
        do {
            if async {
                try consumer.commitAsync(offsets)
            } else {
                try await consumer.commit(offsets)
            }
        } catch {
            // Not fatal: the next commit of a higher offset covers it, and a re-read is idempotent.
            logger.notice("entitlements: commit failed", metadata: [LogKeys.error: "\(error)"])
        }
    }

    /// The revoke hook: leaves queued messages of the partitions to their next owner, waits for the batch being
    /// written, then commits what was written.
    private func revoke(_ revocation: KafkaRevocation) async {
        let partitions = Set(revocation.partitions)
        queue.discard(partitions)
        await waitUntilIdle()
        await commitWritten(only: partitions)
    }

    private func setBusy(_ busy: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.busy = busy
            guard !busy else { return [] }
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        waiters.forEach { $0.resume() }
    }

    private func waitUntilIdle() async {
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state -> Bool in
                if !state.busy { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}

/// Lets the consumer's revoke hook reach the projector that owns the consumer (created first).
private final class RevokeHookBox: Sendable {
    private let hook = Mutex<(@Sendable (KafkaRevocation) async -> Void)?>(nil)
    func set(_ body: @escaping @Sendable (KafkaRevocation) async -> Void) { hook.withLock { $0 = body } }
    func call(_ revocation: KafkaRevocation) async { await hook.withLock { $0 }?(revocation) }
}

extension Duration {
    var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
}
