import CRdKafka
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
    private let rewinds = PendingRewinds()
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
        self.client = try RDKafkaClient(kind: .consumer, properties: properties, callbackContext: context) { conf in
            RDKafkaCallbackContext.installCommonCallbacks(on: conf)
            rd_kafka_conf_set_rebalance_cb(conf, consumerRebalanceCallback)
            rd_kafka_conf_set_offset_commit_cb(conf, consumerOffsetCommitCallback)
        }
        // Serve the main queue (errors, logs, commit results) from rd_kafka_consumer_poll too.
        let redirected = client.withHandle { rd_kafka_poll_set_consumer($0) }
        if redirected != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(redirected, context: "rd_kafka_poll_set_consumer")
        }
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
    public var assignment: Set<KafkaTopicPartition> { rebalance.assignment }

    /// How often the poll thread woke a fetcher librdkafka had left idle with messages waiting on the broker
    /// (``FetchStallWakeUp``).
    public var fetchWakeUps: Int { wakeUps.value.load(ordering: .relaxed) }

    /// Joins the group for these topics (replaces an earlier subscription).
    public func subscribe(topics: [String]) throws(KafkaError) {
        let list = topics.map { KafkaTopicPartition(topic: $0, partition: RD_KAFKA_PARTITION_UA) }
        let err = RDKafkaTopicPartitionList.with(list) { list in
            client.withHandle { rd_kafka_subscribe($0, list) }
        }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(err, context: "subscribe to \(topics.joined(separator: ","))")
        }
    }

    /// Commits these offsets (each the offset of the next message to read) and waits for the
    /// group coordinator's answer, on a thread of its own.
    public func commit(_ offsets: [KafkaCommitOffset]) async throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let client = self.client
        let failure: KafkaError? = await BlockingCall.run(name: "kafka-commit") {
            RDKafkaTopicPartitionList.with(offsets) { list -> KafkaError? in
                let err = client.withHandle { rd_kafka_commit($0, list, 0) }
                if err != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(err, context: "commit") }
                return RDKafkaTopicPartitionList.firstError(list)
            }
        }
        if let failure { throw failure }
    }

    /// Starts a commit of these offsets and returns at once; a failure is logged (the next commit
    /// of a higher offset covers it).
    public func commitAsync(_ offsets: [KafkaCommitOffset]) throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let err = RDKafkaTopicPartitionList.with(offsets) { list in
            client.withHandle { rd_kafka_commit($0, list, 1) }
        }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err, context: "commitAsync") }
    }

    /// The group's committed offsets for these partitions (`nil` where nothing was committed).
    public func committedOffsets(
        for partitions: [KafkaTopicPartition], timeout: Duration = .seconds(10)
    ) async throws(KafkaError) -> [KafkaTopicPartition: Int64?] {
        let client = self.client
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000)
        let result: Result<[KafkaCommitOffset], KafkaError> = await BlockingCall.run(name: "kafka-committed") {
            RDKafkaTopicPartitionList.with(partitions) { list in
                let err = client.withHandle { rd_kafka_committed($0, list, milliseconds) }
                if err != RD_KAFKA_RESP_ERR_NO_ERROR { return .failure(KafkaError(err, context: "committed")) }
                if let failure = RDKafkaTopicPartitionList.firstError(list) { return .failure(failure) }
                return .success(RDKafkaTopicPartitionList.read(list))
            }
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
        let failure = RDKafkaTopicPartitionList.with(partitions) { list -> KafkaError? in
            let err = client.withHandle {
                pause ? rd_kafka_pause_partitions($0, list) : rd_kafka_resume_partitions($0, list)
            }
            if err != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(err, context: pause ? "pause" : "resume") }
            return RDKafkaTopicPartitionList.firstError(list)
        }
        if let failure { throw failure }
        rebalance.setPaused(partitions, pause)
    }

    /// Reads `partition` again from `offset`: the poll thread seeks there (waiting until librdkafka
    /// has dropped what it had fetched from the old position), drops this partition's messages still
    /// buffered in `events`, and then delivers `.rewound(partition, offset)`. Every message of the
    /// partition after that event comes from the new position; messages of it that arrive before the
    /// event were read before the seek and are to be ignored. A request for a partition that is not
    /// assigned any more is dropped (a new assignment reads from the committed offset); a seek that
    /// fails is logged and tried again.
    public func rewind(_ partition: KafkaTopicPartition, to offset: Int64) {
        rewinds.add(KafkaCommitOffset(topicPartition: partition, offset: offset))
    }

    /// The client's fatal error, once librdkafka raised one.
    public var fatalError: KafkaError? {
        context.fatalError.withLock { $0 } ?? client.fatalError
    }

    /// Raises a fatal error in librdkafka (`rd_kafka_test_fatal_error`), for tests of the fatal path.
    func triggerFatalErrorForTesting(reason: String) {
        _ = client.withHandle { rd_kafka_test_fatal_error($0, RD_KAFKA_RESP_ERR__FENCED, reason) }
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
        let rewinds = self.rewinds
        let rebalance = self.rebalance
        let thread = Thread {
            var fatal: KafkaError?
            var stalledFetch = FetchStallWakeUp()
            while !stop.isSet {
                if let error = context.fatalError.withLock({ $0 }) {
                    fatal = error
                    break
                }
                if rewinds.hasRequests {
                    rewinds.perform(client: client, rebalance: rebalance, channel: channel, stop: stop, logger: logger)
                }
                guard
                    let message = client.withHandle({
                        rd_kafka_consumer_poll($0, FetchStallWakeUp.pollTimeoutMilliseconds)
                    })
                else {
                    if stalledFetch.pollWasEmpty(client: client, fetching: rebalance.fetching) {
                        wakeUps.value.add(1, ordering: .relaxed)
                    }
                    continue
                }
                stalledFetch.messageArrived()
                // Ownership: rd_kafka_consumer_poll hands us the message; copied, then destroyed here.
                let event = ConsumerMessageConversion.event(from: message, client: client, logger: logger)
                rd_kafka_message_destroy(message)
                switch event {
                case .event(let event):
                    channel.push(event, unless: stop)
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
                let err = client.withHandle { rd_kafka_consumer_close($0) }
                if err != RD_KAFKA_RESP_ERR_NO_ERROR {
                    logger.warning("kafka consumer close", metadata: [LogKeys.error: "\(KafkaError(err))"])
                }
                channel.finish()
            }
            ended.signal()
        }
        thread.name = "kafka-consumer-poll"
        thread.start()
    }
}

/// Rewind requests, performed on the poll thread between two polls: there the seek, the discarding
/// of buffered messages and the `.rewound` event are ordered with every message the thread hands on.
final class PendingRewinds: Sendable {
    private let requests = Mutex<[KafkaTopicPartition: Int64]>([:])

    /// Adds a request; a later one for the same partition replaces an earlier one not yet performed.
    func add(_ request: KafkaCommitOffset) {
        requests.withLock { $0[request.topicPartition] = request.offset }
    }

    var hasRequests: Bool { requests.withLock { !$0.isEmpty } }

    /// Seeks each requested partition that is still assigned, then discards its buffered messages and
    /// announces the rewind; keeps what failed for the next round.
    func perform(
        client: RDKafkaClient, rebalance: ConsumerRebalanceHandler, channel: KafkaEventChannel, stop: StopFlag,
        logger: Logger
    ) {
        let taken = requests.withLock { requests in
            defer { requests = [:] }
            return requests
        }
        let assignment = rebalance.assignment
        for (partition, offset) in taken where assignment.contains(partition) {
            let request = KafkaCommitOffset(topicPartition: partition, offset: offset)
            // With a timeout the call returns once the fetcher has moved: nothing fetched from the old
            // position reaches `rd_kafka_consumer_poll` after it. 5 s, in the unit the linked librdkafka reads.
            let timeout = RDKafkaVersion.seekTimeoutArgument(milliseconds: 5_000)
            let failure = RDKafkaTopicPartitionList.with([request]) { list -> KafkaError? in
                if let error = client.withHandle({ rd_kafka_seek_partitions($0, list, timeout) }) {
                    return KafkaError(consuming: error, context: "seek \(request)")
                }
                return RDKafkaTopicPartitionList.firstError(list)
            }
            if let failure {
                logger.warning(
                    "kafka rewind failed; trying again",
                    metadata: [LogKeys.kafkaRewind: "\(request)", LogKeys.error: "\(failure)"])
                requests.withLock { if $0[partition] == nil { $0[partition] = offset } }
                continue
            }
            channel.discardMessages(of: [partition])
            channel.push(.rewound(partition, offset: offset), unless: stop)
        }
    }
}

/// Turns one polled `rd_kafka_message_t` into an event, an ignorable notice or a fatal error.
enum ConsumerMessageConversion {
    enum Outcome {
        case event(KafkaConsumerEvent)
        case fatal(KafkaError)
        case ignored
    }

    static func event(
        from pointer: UnsafeMutablePointer<rd_kafka_message_t>, client: RDKafkaClient, logger: Logger
    ) -> Outcome {
        let message = pointer.pointee
        let topic = message.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        guard message.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            if message.err == RD_KAFKA_RESP_ERR__PARTITION_EOF { return .ignored }
            if message.err == RD_KAFKA_RESP_ERR__FATAL {
                return .fatal(client.fatalError ?? KafkaError(message.err, context: "consume"))
            }
            logger.warning(
                "kafka consumer error",
                metadata: [
                    LogKeys.topic: "\(topic)", LogKeys.partition: "\(message.partition)",
                    LogKeys.error: "\(KafkaError(message.err, context: "consume"))",
                ])
            return .ignored
        }
        let value = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: message.len)) }
        let key = message.key.map { Array(UnsafeRawBufferPointer(start: $0, count: message.key_len)) }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(pointer, &timestampType)
        return .event(
            .message(
                KafkaConsumerMessage(
                    topicPartition: KafkaTopicPartition(topic: topic, partition: message.partition),
                    offset: message.offset, key: key, value: value, headers: headers(of: pointer),
                    timestampMilliseconds: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp)))
    }

    /// Copies the headers; the list belongs to the message (no destroy here).
    private static func headers(of message: UnsafeMutablePointer<rd_kafka_message_t>) -> [KafkaHeader] {
        var list: OpaquePointer?
        guard rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
        var result: [KafkaHeader] = []
        var index = 0
        var name: UnsafePointer<CChar>?
        var value: UnsafeRawPointer?
        var size = 0
        while rd_kafka_header_get_all(list, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
            result.append(
                KafkaHeader(
                    name: name.map { String(cString: $0) } ?? "",
                    value: value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            index += 1
        }
        return result
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
    private let assigned = Mutex<(partitions: Set<KafkaTopicPartition>, generation: UInt64)>(([], 0))
    /// Assigned partitions the application paused (a new assignment starts unpaused).
    private let paused = Mutex<Set<KafkaTopicPartition>>([])
    /// The committed offsets the assignment started from (partitions without a commit are absent).
    private let starts = Mutex<[KafkaTopicPartition: Int64]>([:])

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

    var assignment: Set<KafkaTopicPartition> { assigned.withLock { $0.partitions } }

    /// The assigned partitions not paused (those librdkafka fetches), each with the committed offset its
    /// assignment started from (-1 without a commit).
    var fetching: [KafkaCommitOffset] {
        let paused = self.paused.withLock { $0 }
        let starts = self.starts.withLock { $0 }
        return assigned.withLock { $0.partitions.subtracting(paused) }.map {
            KafkaCommitOffset(topicPartition: $0, offset: starts[$0] ?? -1)
        }
    }

    func setPaused(_ partitions: [KafkaTopicPartition], _ isPaused: Bool) {
        paused.withLock { paused in
            if isPaused { paused.formUnion(partitions) } else { paused.subtract(partitions) }
        }
    }

    /// `apply` assigns and returns librdkafka's answer with the committed offsets the assignment starts from and the
    /// partitions whose committed offset could not be read.
    func assign(
        _ partitions: [KafkaTopicPartition],
        apply: () -> (
            rd_kafka_resp_err_t, startingOffsets: [KafkaTopicPartition: Int64], unknown: Set<KafkaTopicPartition>
        )
    ) {
        let (err, startingOffsets, unknown) = apply()
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.error("kafka assign failed", metadata: [LogKeys.error: "\(KafkaError(err, context: "assign"))"])
            return
        }
        // Numbered on this thread, before the event is pushed: a revoke hook told this number can never be
        // mistaken for one about a later assignment, however late it runs.
        let generation = assigned.withLock { state -> UInt64 in
            state.generation += 1
            state.partitions = Set(partitions)
            return state.generation
        }
        paused.withLock { $0 = [] }
        starts.withLock { $0 = startingOffsets }
        logger.info("kafka partitions assigned", metadata: [LogKeys.partitions: "\(partitions)"])
        channel.push(
            .partitionsAssigned(
                partitions, startingOffsets: startingOffsets, startsUnknown: unknown, generation: generation),
            unless: stop)
    }

    /// How often the rebalance callback asks for the committed offsets, the time each ask may take, and the waits
    /// between asks: a coordinator that is moving or loading its offsets usually answers within a second, and the
    /// poll thread (a thread of its own) may wait that long.
    static let committedLookupAttempts = 3
    static let committedLookupTimeoutMilliseconds: Int32 = 5_000
    static let committedLookupBackoffSeconds: [TimeInterval] = [0.1, 0.3]

    /// Reads the group's committed offsets into librdkafka's assignment list, so the assignment starts exactly
    /// there, and returns them (partitions without a commit start at `auto.offset.reset` and are left out), asking
    /// again when an answer fails. The partitions still unread after the last ask are left to librdkafka's own
    /// lookup and returned as `unknown`: the application checks their first messages once it can read the offsets.
    func lookUpCommittedOffsets(
        _ rk: OpaquePointer, into list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) -> (starts: [KafkaTopicPartition: Int64], unknown: Set<KafkaTopicPartition>) {
        guard list.pointee.cnt > 0, let elements = list.pointee.elems else { return ([:], []) }
        let count = Int(list.pointee.cnt)
        var err = RD_KAFKA_RESP_ERR_NO_ERROR
        var failure: KafkaError?
        for attempt in 1...Self.committedLookupAttempts {
            for index in 0..<count {
                elements[index].offset = Int64(RD_KAFKA_OFFSET_INVALID)
                elements[index].err = RD_KAFKA_RESP_ERR_NO_ERROR
            }
            err = rd_kafka_committed(rk, list, Self.committedLookupTimeoutMilliseconds)
            failure =
                err != RD_KAFKA_RESP_ERR_NO_ERROR
                ? KafkaError(err, context: "committed") : RDKafkaTopicPartitionList.firstError(list)
            guard let failure, attempt < Self.committedLookupAttempts else { break }
            logger.notice(
                "kafka committed offsets not read at assignment; asking again",
                metadata: [LogKeys.error: "\(failure)", LogKeys.kafkaAttempts: "\(attempt)"])
            let backoff = Self.committedLookupBackoffSeconds
            Thread.sleep(forTimeInterval: backoff[min(attempt - 1, backoff.count - 1)])
        }
        var starts: [KafkaTopicPartition: Int64] = [:]
        var unknown: Set<KafkaTopicPartition> = []
        for index in 0..<count {
            let partition = KafkaTopicPartition(
                topic: String(cString: elements[index].topic), partition: elements[index].partition)
            if err != RD_KAFKA_RESP_ERR_NO_ERROR || elements[index].err != RD_KAFKA_RESP_ERR_NO_ERROR {
                elements[index].offset = Int64(RD_KAFKA_OFFSET_INVALID)
                elements[index].err = RD_KAFKA_RESP_ERR_NO_ERROR
                unknown.insert(partition)
            } else if elements[index].offset >= 0 {
                starts[partition] = elements[index].offset
            }
        }
        if let failure, !unknown.isEmpty {
            logger.warning(
                "kafka committed offsets not read at assignment; librdkafka reads them, the application checks later",
                metadata: [
                    LogKeys.error: "\(failure)",
                    LogKeys.partitions: "\(unknown.sorted { $0.description < $1.description })",
                ])
        }
        return (starts, unknown)
    }

    func revoke(_ partitions: [KafkaTopicPartition], apply: () -> rd_kafka_resp_err_t) {
        channel.discardMessages(of: Set(partitions))
        if let onRevoke, !partitions.isEmpty {
            let revocation = KafkaRevocation(partitions: partitions, generation: assigned.withLock { $0.generation })
            runBlocking(deadline: revokeDeadline) { await onRevoke(revocation) }
        }
        let err = apply()
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.error("kafka unassign failed", metadata: [LogKeys.error: "\(KafkaError(err, context: "assign"))"])
        }
        assigned.withLock { $0.partitions.subtract(partitions) }
        paused.withLock { $0.subtract(partitions) }
        logger.info("kafka partitions revoked", metadata: [LogKeys.partitions: "\(partitions)"])
        channel.push(.partitionsRevoked(partitions), unless: stop)
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

/// librdkafka's rebalance callback (eager protocol), on the poll thread.
private func consumerRebalanceCallback(
    rk: OpaquePointer?, err: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard let rk else { return }
    guard let handler = RDKafkaCallbackContext.from(opaque)?.rebalance else {
        _ = rd_kafka_assign(rk, err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS ? partitions : nil)
        return
    }
    let list = RDKafkaTopicPartitionList.read(partitions).map(\.topicPartition)
    switch err {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
        handler.assign(list) {
            // Explicit starting offsets: the application knows where each partition must start, and can tell
            // when the first message handed on is past it.
            let (starts, unknown) = partitions.map { handler.lookUpCommittedOffsets(rk, into: $0) } ?? ([:], [])
            let err = rd_kafka_assign(rk, partitions)
            // librdkafka keeps an application's pause on a partition across an eager rebalance, so a partition
            // paused before it and assigned again would stay silent while the application believes it fresh.
            // A new assignment starts unpaused; the application re-applies its pauses on `partitionsAssigned`.
            if err == RD_KAFKA_RESP_ERR_NO_ERROR, let partitions {
                _ = rd_kafka_resume_partitions(rk, partitions)
            }
            return (err, starts, unknown)
        }
    case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
        handler.revoke(list) { rd_kafka_assign(rk, nil) }
    default:
        // An error in the rebalance itself: librdkafka asks us to clear the assignment.
        handler.revoke(list) { rd_kafka_assign(rk, nil) }
    }
}

/// Results of `commitAsync` (and of librdkafka's own commits on close); failures are logged.
private func consumerOffsetCommitCallback(
    rk: OpaquePointer?, err: rd_kafka_resp_err_t, offsets: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    opaque: UnsafeMutableRawPointer?
) {
    guard err != RD_KAFKA_RESP_ERR_NO_ERROR, err != RD_KAFKA_RESP_ERR__NO_OFFSET,
        let context = RDKafkaCallbackContext.from(opaque)
    else { return }
    context.logger.warning(
        "kafka asynchronous commit failed", metadata: [LogKeys.error: "\(KafkaError(err, context: "commit"))"])
}
