import Dispatch
import Foundation
import Logging
import Observability
import Synchronization

/// A member of a Kafka consumer group with explicit offset commits and eager rebalancing.
///
/// - A thread of the consumer's own calls `rd_kafka_consumer_poll` and hands messages and
///   rebalance notices to `events`, a bounded single-reader `AsyncSequence`.
/// - Offsets are committed only by `commit`/`commitAsync`, with explicit values (the offset of the
///   next message to read), so a pipeline with many messages in flight per partition can commit up
///   to its lowest unfinished offset.
/// - Before partitions are taken away, `onRevoke` runs so the caller can finish or hand back
///   in-flight work and commit; only then is the assignment cleared.
/// - `pause`/`resume` stop and restart fetching per partition: the pipeline's tool when its
///   in-flight bound is reached.
/// - `rewind` makes a partition read again from an offset: the pipeline's answer when the offsets
///   it is handed skip ahead of what it expects.
///
/// Call `close()` on shutdown: it revokes (running `onRevoke`), leaves the group and ends `events`.
public final class KafkaConsumer: Sendable {
    /// Runs on revocation, before the partitions are given back. Commit what is finished here; the
    /// consumer waits for it up to `KafkaConsumerConfiguration.revokeDeadline`.
    ///
    /// A hook that misses the deadline may still be running (or not even started, on a busy machine)
    /// when the same partitions are assigned again: `revocation.generation` names the assignment it
    /// is about (the one `KafkaConsumerEvent.partitionsAssigned` announced with that generation), so
    /// the hook can leave a newer assignment alone.
    public typealias RevokeHook = @Sendable (_ revocation: KafkaRevocation) async -> Void

    private let client: RDKafkaClient
    private let context: RDKafkaCallbackContext
    private let rebalance: ConsumerRebalanceHandler
    private let channel: KafkaEventChannel
    private let stopPolling = StopFlag()
    private let pollThreadEnded = CompletionSignal()
    private let wakeUps = KafkaEventCount()
    private let logger: Logger

    public init(
        configuration: KafkaConsumerConfiguration,
        logger: Logger = Logger(label: "kafka.consumer"),
        onRevoke: RevokeHook? = nil
    ) throws(KafkaError) {
        let properties = try configuration.librdkafkaProperties()
        let channel = KafkaEventChannel(capacity: configuration.eventBufferCapacity)
        let rebalance = ConsumerRebalanceHandler(
            channel: channel, stop: stopPolling, revokeDeadline: configuration.revokeDeadline, onRevoke: onRevoke,
            logger: logger)
        let context = RDKafkaCallbackContext(logger: logger, rebalance: rebalance)
        self.client = try RDKafkaClient(kind: .consumer, properties: properties, callbackContext: context)
        // Serve the main queue (errors, logs, commit results) from rd_kafka_consumer_poll too.
        if let failure = client.redirectMainQueueToConsumer() { throw failure }
        self.context = context
        self.rebalance = rebalance
        self.channel = channel
        self.logger = logger
        startPollThread()
    }

    deinit {
        stopPolling.set()
    }

    /// Messages and rebalance notices, for one reader. Finishes after `close()`; throws the fatal
    /// error if the client fails for good.
    public var events: KafkaConsumerEvents { KafkaConsumerEvents(channel: channel) }

    /// The partitions currently assigned to this member.
    public var assignment: Set<KafkaTopicPartition> { rebalance.state.withLock { $0.assignment } }

    /// How often the poll thread woke a fetcher librdkafka had left idle with messages waiting on the broker
    /// (``FetchStallWakeUp``).
    public var fetchWakeUps: Int { wakeUps.value.load(ordering: .relaxed) }

    /// Joins the group for these topics (replaces an earlier subscription).
    public func subscribe(topics: [String]) throws(KafkaError) {
        if let failure = client.subscribe(topics: topics) { throw failure }
    }

    /// Commits these offsets (each the offset of the next message to read) and waits for the
    /// group coordinator's answer, on a thread of its own.
    public func commit(_ offsets: [KafkaCommitOffset]) async throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let client = self.client
        let failure: KafkaError? = await BlockingCall.run(name: "kafka-commit") { client.commit(offsets) }
        if let failure { throw failure }
    }

    /// Starts a commit of these offsets and returns at once; a failure is logged (the next commit
    /// of a higher offset covers it).
    public func commitAsync(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        if let failure = client.commitAsync(offsets) { throw failure }
    }

    /// The group's committed offsets for these partitions (`nil` where nothing was committed).
    public func committedOffsets(
        for partitions: [KafkaTopicPartition], timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [KafkaTopicPartition: Int64?] {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000)
        let result: Result<[KafkaCommitOffset], KafkaError> = await BlockingCall.run(name: "kafka-committed") {
            client.committed(partitions, timeoutMilliseconds: milliseconds)
        }
        var answer: [KafkaTopicPartition: Int64?] = [:]
        for entry in try result.get() {
            answer[entry.topicPartition] = entry.offset >= 0 ? entry.offset : nil
        }
        return answer
    }

    /// Stops fetching these partitions until `resume`. Events already handed to `events` (at most
    /// `eventBufferCapacity`) still arrive. A rebalance ends the pause: a new assignment starts
    /// unpaused (this layer resumes every newly assigned partition, since librdkafka itself would keep
    /// the pause of a partition it assigns again), so re-apply pauses after `partitionsAssigned`.
    public func pause(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try pauseOrResume(partitions, pause: true)
    }

    /// Fetches these partitions again, from where reading stopped.
    public func resume(_ partitions: [KafkaTopicPartition]) throws(KafkaError) {
        try pauseOrResume(partitions, pause: false)
    }

    private func pauseOrResume(_ partitions: [KafkaTopicPartition], pause: Bool) throws(KafkaError) {
        guard !partitions.isEmpty else { return }
        if let failure = client.setPaused(partitions, pause: pause) { throw failure }
        rebalance.state.withLock { $0.pauseApplied(partitions, paused: pause) }
    }

    /// Reads `partition` again from `offset`: the poll thread seeks there (waiting until librdkafka
    /// has dropped what it had fetched from the old position), drops this partition's messages still
    /// buffered in `events`, and then delivers `.rewound(partition, offset)`. Every message of the
    /// partition after that event comes from the new position; messages of it that arrive before the
    /// event were read before the seek and are to be ignored. A request for a partition that is not
    /// assigned any more is dropped (a new assignment reads from the committed offset); a seek that
    /// fails is logged and tried again.
    public func rewind(_ partition: KafkaTopicPartition, to offset: Int64) {
        let request = KafkaCommitOffset(topicPartition: partition, offset: offset)
        _ = rebalance.state.withLock { $0.rewindRequested(request) }
    }

    /// The client's fatal error, once librdkafka raised one.
    public var fatalError: KafkaError? {
        context.fatalError.withLock { $0 } ?? client.fatalError
    }

    /// Raises a fatal error in librdkafka (`rd_kafka_test_fatal_error`), for tests of the fatal path.
    func triggerFatalErrorForTesting(reason: String) {
        client.raiseFatalErrorForTesting(.fenced, reason: reason)
    }

    /// Leaves the group cleanly: the poll thread stops fetching, `rd_kafka_consumer_close` revokes
    /// the assignment (running `onRevoke`, so the caller commits) and `events` finishes. Safe to call
    /// more than once.
    public func close() async {
        stopPolling.set()
        await pollThreadEnded.wait()
    }

    /// The poll loop. It holds the client, the context and the channel, not `self`.
    private func startPollThread() {
        let client = self.client
        let wakeUps = self.wakeUps
        let context = self.context
        let channel = self.channel
        let stop = self.stopPolling
        let ended = self.pollThreadEnded
        let logger = self.logger
        let rebalance = self.rebalance
        let thread = Thread {
            var fatal: KafkaError?
            var stalledFetch = FetchStallWakeUp()
            while !stop.isSet {
                if let error = context.fatalError.withLock({ $0 }) {
                    fatal = error
                    break
                }
                rebalance.performPendingRewinds(client: client)
                guard
                    let polled = client.consumerPoll(
                        timeoutMilliseconds: FetchStallWakeUp.pollTimeoutMilliseconds, logger: logger)
                else {
                    let fetching = rebalance.state.withLock { $0.fetching }
                    if stalledFetch.pollWasEmpty(client: client, fetching: fetching) {
                        wakeUps.value.add(1, ordering: .relaxed)
                    }
                    continue
                }
                stalledFetch.messageArrived()
                switch polled {
                case .message(let message):
                    channel.push(.message(message), unless: stop)
                case .fatal(let error):
                    context.fatalError.withLock { if $0 == nil { $0 = error } }
                case .ignored:
                    break
                }
            }
            if let fatal {
                // Loudly first: the reader gets the error at once. A consumer in fatal state cannot
                // leave its group cleanly (rd_kafka_consumer_close would wait for ever), so it is
                // destroyed without a close; the revoke hook does not run and the next owner
                // re-reads whatever was not committed.
                logger.critical("kafka consumer stopped by a fatal error", metadata: [LogKeys.error: "\(fatal)"])
                channel.finish(fatal)
                client.destroyWithoutConsumerClose.set()
            } else {
                // Revokes through the rebalance callback (on this thread, running the revoke hook)
                // and leaves the group.
                if let failure = client.closeConsumer() {
                    logger.warning("kafka consumer close", metadata: [LogKeys.error: "\(failure)"])
                }
                channel.finish()
            }
            ended.signal()
        }
        thread.name = "kafka-consumer-poll"
        thread.start()
    }
}

/// The consumer's side of eager rebalancing, called on the poll thread from inside
/// `rd_kafka_consumer_poll` (or `rd_kafka_consumer_close`).
///
/// On revoke the poll thread blocks on a semaphore while a Task runs the async revoke hook, with a
/// deadline, and only then calls `rd_kafka_assign(NULL)`. This is safe because:
/// - the poll thread is a dedicated thread, not one of the cooperative pool, so blocking it cannot
///   starve the Task it waits for;
/// - the hook's commits go through `rd_kafka_commit` on other threads, and librdkafka serves commit
///   replies on its internal threads, not on the consumer queue this thread would otherwise poll, so
///   no commit waits for the blocked poll thread;
/// - while the hook runs, the partitions are still assigned to this member (the group waits for
///   its JoinGroup up to `max.poll.interval.ms`/the rebalance timeout), so its commits are accepted;
/// - the deadline bounds the wait: a hook that hangs cannot keep the group from rebalancing. Work
///   it did not commit in time is read again by the next owner (at-least-once).
///
/// Known difference of librdkafka's mock cluster: its coordinator refuses OffsetCommit with
/// `REBALANCE_IN_PROGRESS` once another member's join started a rebalance, so under the mock a
/// hook's commit during a join-triggered revoke can fail (the next owner then re-reads that work);
/// real brokers accept commits of the current generation until the rebalance completes. Commits
/// in the hook during `close()` (leave) succeed on both.
final class ConsumerRebalanceHandler: Sendable {
    private let channel: KafkaEventChannel
    private let stop: StopFlag
    private let revokeDeadline: Duration
    private let onRevoke: KafkaConsumer.RevokeHook?
    private let logger: Logger
    /// The assignment, pauses, pending rewinds and revocation: one state behind one lock. Every method of it
    /// returns what to do; that is done after the lock is released.
    let state = Mutex(ConsumerStateMachine())

    init(
        channel: KafkaEventChannel, stop: StopFlag, revokeDeadline: Duration, onRevoke: KafkaConsumer.RevokeHook?,
        logger: Logger
    ) {
        self.channel = channel
        self.stop = stop
        self.revokeDeadline = revokeDeadline
        self.onRevoke = onRevoke
        self.logger = logger
    }

    /// Assigns `partitions`, each starting at its committed offset read here, resumes them, and announces the
    /// assignment.
    func assign(_ partitions: [KafkaTopicPartition], member: RDKafkaRebalanceHandle) {
        // Explicit starting offsets: the application knows where each partition must start, and can tell
        // when the first message handed on is past it.
        let (startingOffsets, unknown) = lookUpCommittedOffsets(partitions) {
            member.committed(partitions, timeoutMilliseconds: Self.committedLookupTimeoutMilliseconds)
        }
        if let failure = member.assign(partitions, startingAt: startingOffsets) {
            logger.error("kafka assign failed", metadata: [LogKeys.error: "\(failure)"])
            return
        }
        // librdkafka keeps an application's pause on a partition across an eager rebalance, so a partition
        // paused before it and assigned again would stay silent while the application believes it fresh.
        // A new assignment starts unpaused; the application re-applies its pauses on `partitionsAssigned`.
        member.resume(partitions)
        let announcement = state.withLock {
            $0.assigned(partitions, startingOffsets: startingOffsets, startsUnknown: unknown)
        }
        logger.info("kafka partitions assigned", metadata: [LogKeys.partitions: "\(partitions)"])
        channel.push(announcement, unless: stop)
    }

    /// How often the rebalance callback asks for the committed offsets, the time each ask may take, and the waits
    /// between asks: a coordinator that is moving or loading its offsets usually answers within a second, and the
    /// poll thread (a thread of its own) may wait that long.
    static let committedLookupAttempts = 3
    static let committedLookupTimeoutMilliseconds: Int32 = 5_000
    static let committedLookupBackoffSeconds: [TimeInterval] = [0.1, 0.3]

    /// Asks for the group's committed offsets (`ask`, one `rd_kafka_committed`), again when an answer fails, and
    /// returns where the assignment starts: partitions without a commit start at `auto.offset.reset` and are left
    /// out. The partitions still unread after the last ask are left to librdkafka's own lookup and returned as
    /// `unknown`: the application checks their first messages once it can read the offsets.
    func lookUpCommittedOffsets(
        _ partitions: [KafkaTopicPartition], ask: () -> RDKafkaCommittedLookup
    ) -> (starts: [KafkaTopicPartition: Int64], unknown: Set<KafkaTopicPartition>) {
        guard !partitions.isEmpty else { return ([:], []) }
        var lookup = RDKafkaCommittedLookup(failure: nil, entries: [])
        for attempt in 1...Self.committedLookupAttempts {
            lookup = ask()
            guard let failure = lookup.firstFailure, attempt < Self.committedLookupAttempts else { break }
            logger.notice(
                "kafka committed offsets not read at assignment; asking again",
                metadata: [LogKeys.error: "\(failure)", LogKeys.kafkaAttempts: "\(attempt)"])
            let backoff = Self.committedLookupBackoffSeconds
            Thread.sleep(forTimeInterval: backoff[min(attempt - 1, backoff.count - 1)])
        }
        var starts: [KafkaTopicPartition: Int64] = [:]
        var unknown: Set<KafkaTopicPartition> = []
        for (entry, error) in lookup.entries {
            if lookup.failure != nil || error != nil {
                unknown.insert(entry.topicPartition)
            } else if entry.offset >= 0 {
                starts[entry.topicPartition] = entry.offset
            }
        }
        if let failure = lookup.firstFailure, !unknown.isEmpty {
            logger.warning(
                "kafka committed offsets not read at assignment; librdkafka reads them, the application checks later",
                metadata: [
                    LogKeys.error: "\(failure)",
                    LogKeys.partitions: "\(unknown.sorted { $0.description < $1.description })",
                ])
        }
        return (starts, unknown)
    }

    /// Runs the revoke hook (with its deadline), clears the assignment and announces the revocation.
    func revoke(_ partitions: [KafkaTopicPartition], member: RDKafkaRebalanceHandle) {
        let action = state.withLock { $0.revokeRequested(partitions) }
        channel.discardMessages(of: action.discardBuffered)
        if let onRevoke, let revocation = action.revocation {
            runBlocking(deadline: revokeDeadline) { await onRevoke(revocation) }
        }
        if let failure = member.unassign() {
            logger.error("kafka unassign failed", metadata: [LogKeys.error: "\(failure)"])
        }
        let announcement = state.withLock { $0.revokeFinished(partitions) }
        logger.info("kafka partitions revoked", metadata: [LogKeys.partitions: "\(partitions)"])
        channel.push(announcement, unless: stop)
    }

    /// Performs the rewinds asked for since the last round (on the poll thread, between two polls: there the seek,
    /// the discarding of buffered messages and the `.rewound` event are ordered with every message the thread hands
    /// on). A failed seek is logged and tried again in the next round.
    func performPendingRewinds(client: RDKafkaClient) {
        let requests = state.withLock { $0.hasPendingRewinds ? $0.takePendingRewinds() : [] }
        for request in requests {
            if let failure = client.seek(request, timeoutMilliseconds: 5_000) {
                logger.warning(
                    "kafka rewind failed; trying again",
                    metadata: [LogKeys.kafkaRewind: "\(request)", LogKeys.error: "\(failure)"])
                state.withLock { $0.rewindFailed(request) }
                continue
            }
            channel.discardMessages(of: [request.topicPartition])
            channel.push(.rewound(request.topicPartition, offset: request.offset), unless: stop)
        }
    }

    /// Runs `body` in a Task and blocks this (non-cooperative) thread until it ends or the deadline passes.
    private func runBlocking(deadline: Duration, _ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            await body()
            done.signal()
        }
        let nanoseconds = deadline.components.seconds * 1_000_000_000 + deadline.components.attoseconds / 1_000_000_000
        if done.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds))) == .timedOut {
            task.cancel()
            logger.error(
                "kafka revoke hook missed its deadline; giving the partitions back anyway",
                metadata: [LogKeys.kafkaDeadline: "\(deadline)"])
        }
    }
}
