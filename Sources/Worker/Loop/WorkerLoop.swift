import Foundation
import Kafka
import Logging
import Messages
import Metrics
import Observability
import Synchronization

/// Where a worker reads and writes.
public struct WorkerTopics: Sendable, Hashable {
    public var jobs: String
    public var verdicts: String
    public var deadLetters: String

    public init(
        jobs: String = Topics.jobs, verdicts: String = Topics.verdicts, deadLetters: String = Topics.deadLetters
    ) {
        self.jobs = jobs
        self.verdicts = verdicts
        self.deadLetters = deadLetters
    }
}

/// One worker's Kafka loop: consumes jobs, runs them with high concurrency inside each partition while keeping
/// each account's jobs in order, produces one verdict (or dead letter) per message and commits each partition up to
/// its lowest unfinished offset once the output's delivery report came back.
///
/// - Memory is bounded: above `maximumInFlight` held jobs the assignment is paused, and resumed below 75 %. A job
///   the proof alone does not decide is parked as data (``JobStage``) until a runner of the ledger stage, then of the
///   Apple stage, takes it: thousands of jobs waiting for Apple are values in a queue, not suspended tasks.
/// - On revoke (a rebalance, or ``drain()``): no new job of those partitions starts, jobs waiting behind a busy key
///   are dropped, running jobs finish (bounded by the consumer's revoke deadline), then the offsets are committed.
/// - Delivery is at least once: a crash before the commit redelivers; the ledger gives a redelivered job the
///   verdict it got first, and `verdict_id` lets consumers de-duplicate.
public final class WorkerLoop: Sendable {
    public struct Configuration: Sendable {
        public var topics: WorkerTopics
        /// Jobs held at most (running and waiting); partitions are paused above it.
        public var maximumInFlight: Int
        public var maximumMessageBytes: Int
        /// How often finished offsets are committed (asynchronously; revokes commit synchronously).
        public var commitInterval: Duration
        /// How long an output may go without proof of delivery (a delivery report with an offset) before the worker
        /// reports itself unready (`output_undeliverable`). Its job stays uncommitted and the delivery goes on.
        public var deliveryTimeout: Duration
        /// The largest record the worker sends (`KafkaProducerRecord.framedSize`), at most the producer's
        /// `message.max.bytes`: a dead letter that would be larger is sent with its value cut to fit.
        public var maximumProduceBytes: Int

        public init(
            topics: WorkerTopics = WorkerTopics(), maximumInFlight: Int = 10_000,
            maximumMessageBytes: Int = 1 << 20, maximumProduceBytes: Int = 1_000_000,
            commitInterval: Duration = .milliseconds(200), deliveryTimeout: Duration = .seconds(120)
        ) {
            self.topics = topics
            self.maximumInFlight = maximumInFlight
            self.maximumMessageBytes = maximumMessageBytes
            self.maximumProduceBytes = maximumProduceBytes
            self.commitInterval = commitInterval
            self.deliveryTimeout = deliveryTimeout
        }
    }

    public let consumer: KafkaConsumer
    public let health: WorkerHealth
    private let producer: KafkaProducer
    private let decider: any JobStepping
    private let configuration: Configuration
    private let scheduler: WorkerScheduler
    private let codec: MessageCodec
    private let logger: Logger
    private let slot: ConsumerSlot
    private let onFatal: @Sendable (String) -> Void
    /// Told of each verdict proven delivered (``AppleFollowUps``); nil: nobody is.
    private let afterDelivery: (@Sendable (Verdict, ReceiptJob) async -> Bool)?
    /// Which verdicts ``afterDelivery`` is told of; nil: every one. The others take the delivery without a waiting
    /// task.
    private let followsUp: (@Sendable (Verdict, ReceiptJob) -> Bool)?
    private let metrics = WorkerMetrics()
    private let deliveries = OutputDeliveries()
    private let clock = ContinuousClock()
    /// Jobs whose proof is to be read: a key's first job, and its next one once the previous is done.
    private let proofStage: JobStage<WorkerScheduler.Admitted>
    /// Jobs that wait for the ledger, parked as data, and the runners that go on with them.
    private let ledgerStage: JobStage<Parked<LedgerBoundJob>>
    /// Jobs that wait for Apple, parked as data, and the runners that finish them.
    private let storeStage: JobStage<Parked<StoreBoundJob>>
    /// Decided jobs whose verdict, handed to the producer without a task waiting (``deliverLater(_:admitted:)``), was
    /// not proven stored: runners deliver them again the waiting way.
    private let deliveryStage: JobStage<PendingDelivery>
    /// Deflates the receipts of parked jobs.
    private let receiptDeflate = ReceiptDeflate()

    /// - Parameters:
    ///   - consumerConfiguration: its `revokeDeadline` bounds how long a revoke (and a drain) waits for running jobs.
    ///   - producer: delivers verdicts and dead letters (shared with the throttle signals).
    ///   - onFatal: called once when a job hits a fault the worker cannot work around; the caller drains and exits.
    ///   - afterDelivery: called with each verdict once its delivery report came back (its ledger write committed
    ///     before), and awaited before the job completes (its offset may be committed only after): a follow-up
    ///     records its Apple call here, one ledger write, never the call itself. It returns false when it could not
    ///     finish its part before the job was cancelled (a revoke or a drain): the job then stays uncommitted.
    ///   - followsUp: which verdicts `afterDelivery` needs (nil: every one).
    public init(
        consumerConfiguration: KafkaConsumerConfiguration, producer: KafkaProducer, decider: any JobStepping,
        configuration: Configuration = Configuration(), health: WorkerHealth = WorkerHealth(), logger: Logger,
        onFatal: @escaping @Sendable (String) -> Void = { _ in },
        afterDelivery: (@Sendable (Verdict, ReceiptJob) async -> Bool)? = nil,
        followsUp: (@Sendable (Verdict, ReceiptJob) -> Bool)? = nil
    ) throws {
        let scheduler = WorkerScheduler(maximumInFlight: configuration.maximumInFlight)
        // The hook needs the consumer it is given to: set right after creation, before `subscribe`.
        let slot = ConsumerSlot()
        let hookLogger = logger
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration, logger: logger,
            onRevoke: { revocation in
                guard let consumer = slot.consumer.withLock({ $0 }) else { return }
                await Self.handBack(revocation, scheduler: scheduler, consumer: consumer, logger: hookLogger)
            })
        slot.consumer.withLock { $0 = consumer }
        self.slot = slot
        self.consumer = consumer
        self.producer = producer
        self.decider = decider
        // As many proof steps as jobs may be held: a key's first step never waits for another key's.
        self.proofStage = JobStage(limit: configuration.maximumInFlight)
        self.ledgerStage = JobStage(limit: decider.ledgerStageLimit)
        self.storeStage = JobStage(limit: decider.storeStageLimit)
        self.deliveryStage = JobStage(limit: configuration.maximumInFlight)
        self.configuration = configuration
        self.scheduler = scheduler
        self.codec = MessageCodec(maximumMessageBytes: configuration.maximumMessageBytes)
        self.health = health
        self.logger = logger
        self.onFatal = onFatal
        self.afterDelivery = afterDelivery
        self.followsUp = followsUp
        try consumer.subscribe(topics: [configuration.topics.jobs])
    }

    /// Jobs held now (running or waiting for their account's earlier job).
    public var inFlight: Int { scheduler.inFlight }

    /// Reads until the consumer is closed (by ``drain()``), then abandons what is still running: those jobs were
    /// not committed and will be read again by the partitions' next owner.
    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.commitPeriodically() }
            group.addTask { await self.proofStage.run { await self.start($0) } }
            group.addTask {
                await self.ledgerStage.run { parked in
                    let pending = parked.pending
                    await self.step(.consultLedger(pending), job: pending.job, admitted: parked.admitted, after: parked)
                }
            }
            group.addTask {
                await self.storeStage.run { parked in
                    let pending = parked.pending
                    await self.step(.askStore(pending), job: pending.job, admitted: parked.admitted)
                }
            }
            group.addTask {
                await self.deliveryStage.run { pending in
                    let delivered = await self.deliverVerdict(pending.record)
                    self.done(pending.admitted, processed: true, delivered: delivered)
                }
            }
            for try await event in consumer.events {
                switch event {
                case .message(let message):
                    metrics.consumed.increment()
                    switch scheduler.admit(message) {
                    case .taken(let ready, let flow):
                        apply(flow)
                        metrics.inFlight.record(scheduler.inFlight)
                        // A runner of the proof stage started here, not through the stage's stream, when the
                        // stage has room (through a handoff, not a capture: the runner may outlive this job).
                        if let ready, proofStage.claim(ready) {
                            let handoff = Handoff(ready)
                            group.addTask { await self.proofStage.runner(from: handoff) { await self.start($0) } }
                        }
                    case .gap(let expected):
                        // librdkafka handed on an offset past one this worker never got. Committing past it
                        // would lose that job for good (漏单): read the partition again from there.
                        metrics.offsetGaps.increment()
                        logger.warning(
                            "kafka: offsets skipped, reading the partition again from the first one not taken",
                            metadata: [
                                LogKeys.partition: "\(message.partition)", LogKeys.offset: "\(message.offset)",
                                LogKeys.expectedOffset: "\(expected)",
                            ])
                        consumer.rewind(message.topicPartition, to: expected)
                    case .ignored:
                        continue
                    }
                case .rewound(let partition, let offset):
                    let metadata: Logger.Metadata = [
                        LogKeys.partition: "\(partition.partition)", LogKeys.offset: "\(offset)",
                    ]
                    if scheduler.rewound(partition, to: offset) {
                        logger.notice("kafka: partition read again from the first offset not taken", metadata: metadata)
                    } else {
                        logger.debug("kafka: rewind no longer awaited, ignored", metadata: metadata)
                    }
                case .partitionsAssigned(let partitions, let startingOffsets, let startsUnknown, let generation):
                    scheduler.assigned(
                        partitions, startingAt: startingOffsets, startsUnknown: startsUnknown, assignment: generation)
                    if !startsUnknown.isEmpty {
                        group.addTask { await self.learnStarts(of: startsUnknown, assignment: generation) }
                    }
                    health.assigned(partitions: consumer.assignment.count)
                    metrics.assignedPartitions.record(consumer.assignment.count)
                    // A new assignment starts unpaused.
                    if scheduler.isPaused { apply(.pause) }
                case .partitionsRevoked:
                    health.assigned(partitions: consumer.assignment.count)
                    metrics.assignedPartitions.record(consumer.assignment.count)
                }
            }
            group.cancelAll()
        }
        // Verdicts handed to the producer without a waiting task are waited for here, as the runners of the others
        // were: their reports end their jobs. One not proven stored by then is not sent again (the stage is closed).
        var undelivered = deliveryStage.removeAll()
        await deliveries.waitUntilNone()
        undelivered += deliveryStage.removeAll()
        // Jobs still parked when the runners stopped end undecided, as a cancelled step's do; so do the jobs that
        // waited for their proof step, and the jobs of their keys behind them.
        var waiting = proofStage.removeAll()
        let parked = ledgerStage.removeAll().map(\.admitted) + storeStage.removeAll().map(\.admitted)
        for admitted in parked + undelivered.map(\.admitted) {
            if let following = complete(admitted, processed: true, delivered: false) { waiting.append(following) }
        }
        while let next = waiting.popLast() {
            if let following = complete(next, processed: scheduler.beginProcessing(next), delivered: false) {
                waiting.append(following)
            }
        }
    }

    /// Stops fetching, lets running jobs finish within the consumer's revoke deadline, commits, leaves the group.
    /// ``run()`` then returns. Breaks the revoke hook's reference to the consumer, so the client is freed.
    ///
    /// Running jobs finish and their offsets are committed while the group is still stable, before leaving it: a
    /// commit during the leave rebalance may be refused by the coordinator.
    public func drain(timeout: Duration = .seconds(25)) async {
        health.draining()
        let assignment = Array(consumer.assignment)
        try? consumer.pause(assignment)
        let revocation = scheduler.beginRevoke(assignment).revocation
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.scheduler.waitUntilIdle(revocation) }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        let commits = scheduler.endRevoke(revocation)
        if !commits.isEmpty {
            do {
                try await consumer.commit(commits)
            } catch {
                logger.warning("kafka: commit at drain failed", metadata: [LogKeys.error: "\(error)"])
            }
        }
        await consumer.close()
        slot.consumer.withLock { $0 = nil }
    }

    // MARK: Jobs
    //
    // One loop body (``step(_:job:admitted:after:)``) for every stage: advance the job one step, then park it in the
    // stage of the step it waits for, or deliver its verdict and hand the job back to the scheduler, which names the
    // key's next job; that one waits in the proof stage for a runner, never on the task that finished the previous
    // one (a runner of the store stage goes back to the jobs waiting for the store).

    /// A key's next job (a runner of the proof stage): decodes its message, then takes its first step. A job of a
    /// partition being revoked is handed back undone.
    private func start(_ ready: WorkerScheduler.Admitted) async {
        var admitted = ready
        let processed = scheduler.beginProcessing(admitted)
        guard processed, !Task.isCancelled else { return done(admitted, processed: processed, delivered: false) }
        let parsed = parse(admitted.message)
        // The message's bytes are not needed once decoded: a job waiting for the store (thousands may) keeps only
        // its decoded form, not a second copy of the proof.
        admitted.message = admitted.message.withoutPayload
        switch parsed {
        case .deadLetter(let letter):
            let delivered = await deliver(letter)
            done(admitted, processed: true, delivered: delivered)
        case .job(let job):
            await step(.readProof(job, recordedAt: admitted.message.recordedAt), job: job, admitted: admitted)
        }
    }

    /// Advances `flow`, a step of `job` (read from `admitted`), then parks it, or delivers its verdict (or dead letter)
    /// and hands it back to the scheduler. Cancelled (the worker stops), the job ends undecided. `earlier`: the job's
    /// parking in the ledger stage, whose kept receipt a job parked for the store reuses.
    private func step(
        _ flow: JobFlow, job: ReceiptJob, admitted: WorkerScheduler.Admitted,
        after earlier: Parked<LedgerBoundJob>? = nil
    ) async {
        var delivered = false
        if !Task.isCancelled {
            switch await advanced(flow, job: job, admitted: admitted, after: earlier) {
            case .record(let record, let verdict):
                if verdict == nil, deliverLater(record, admitted: admitted) { return }
                delivered = await deliverVerdict(record, verdict, of: job)
            case .deadLetter(let letter): delivered = await deliver(letter)
            case .undecided: break
            case .parked: return
            }
        }
        done(admitted, processed: true, delivered: delivered)
    }

    /// The step's outcome: the decided job's record, a dead letter, the job parked, or undecided.
    @inline(never)
    private func advanced(
        _ flow: JobFlow, job: ReceiptJob, admitted: WorkerScheduler.Admitted, after earlier: Parked<LedgerBoundJob>?
    ) async -> Step {
        do {
            return route(try await decider.advance(flow), job: job, admitted: admitted, after: earlier)
        } catch {
            return failed(job, error, message: admitted.message)
        }
    }

    /// Hands a finished job back to the scheduler; the next job of its key, if any, waits in the proof stage.
    @inline(never)
    private func done(_ admitted: WorkerScheduler.Admitted, processed: Bool, delivered: Bool) {
        if let following = complete(admitted, processed: processed, delivered: delivered) {
            proofStage.park(following)
        }
    }

    /// Hands a finished job back to the scheduler; returns the next job of its key (kept out of the async frames of
    /// the steps that call it: ``AsyncFrames``).
    @inline(never)
    private func complete(
        _ admitted: WorkerScheduler.Admitted, processed: Bool, delivered: Bool
    ) -> WorkerScheduler.Admitted? {
        let (following, flow) = scheduler.complete(admitted, processed: processed, delivered: delivered)
        apply(flow)
        metrics.inFlight.record(scheduler.inFlight)
        return following
    }

    /// A consumed message: a job, or a message that is not one and its dead letter.
    enum Parsed {
        case job(ReceiptJob)
        case deadLetter(DeadLetter)
    }

    /// Decodes a message as a job, or makes the dead letter of a message that is not one.
    @inline(never)
    func parse(_ message: KafkaConsumerMessage) -> Parsed {
        let value = message.value ?? []
        do {
            return .job(try codec.decodeJob(value))
        } catch {
            let letter = DeadLetter(
                rejecting: value, key: message.key, error: error, topic: message.topic, partition: message.partition,
                offset: message.offset)
            metrics.deadLetter(reason: letter.reason)
            logger.notice(
                "job: not a valid job, dead-lettered",
                metadata: [
                    LogKeys.partition: "\(message.partition)", LogKeys.offset: "\(message.offset)",
                    LogKeys.reason: "\(letter.reason)",
                ])
            return .deadLetter(letter)
        }
    }

    /// The record of a dead letter: its key and value, the reason in headers.
    func deadLetterRecord(_ letter: DeadLetter) -> KafkaProducerRecord {
        KafkaProducerRecord(
            topic: configuration.topics.deadLetters, key: letter.key, value: letter.original,
            headers: letter.headers.map { KafkaHeader(name: $0.name, value: $0.value) })
    }

    /// A key longer than this is cut in the last form of a dead letter: account ids, the keys of jobs, are at most
    /// 256 bytes, so only a key that is no account id is ever cut.
    static let minimalDeadLetterKeyBytes = 256

    /// The form of a dead letter sent first: the letter itself if its record fits in
    /// ``Configuration/maximumProduceBytes``, or else its value cut to fit (the key cut too only if it alone does not
    /// fit). Only a letter that is cut has its value hashed.
    func fittingForm(_ letter: DeadLetter) -> DeadLetter {
        let limit = configuration.maximumProduceBytes
        if deadLetterRecord(letter).framedSize <= limit { return letter }
        // The headers of a cut letter do not depend on how much of the value it keeps: sized with none.
        let room = limit - framedSizeWithoutValue(letter, keyBytes: nil)
        if room >= 0 { return letter.truncated(valueBytes: room) }
        let keyRoom = limit - framedSizeWithoutValue(letter, keyBytes: 0)
        return letter.truncated(valueBytes: 0, keyBytes: max(0, keyRoom))
    }

    /// The last form of a dead letter, for a broker whose own limit is smaller still: the headers alone, with no
    /// value and a key of at most ``minimalDeadLetterKeyBytes``.
    func minimalForm(_ letter: DeadLetter) -> DeadLetter {
        letter.truncated(valueBytes: 0, keyBytes: Self.minimalDeadLetterKeyBytes)
    }

    /// The framed size of `letter` cut to no value (and its key to `keyBytes`), without hashing its value: a digest's
    /// text is always 64 characters.
    private func framedSizeWithoutValue(_ letter: DeadLetter, keyBytes: Int?) -> Int {
        var probe = letter
        probe.original = []
        let wholeKey = letter.key ?? []
        let keyCut = keyBytes.map { wholeKey.count > $0 } ?? false
        if keyCut, let keyBytes { probe.key = Array(wholeKey.prefix(keyBytes)) }
        probe.truncation = DeadLetter.Truncation(
            originalBytes: letter.original.count, originalSHA256: String(repeating: "0", count: 64),
            originalKeyBytes: keyCut ? wholeKey.count : nil)
        return deadLetterRecord(probe).framedSize
    }

    /// A decided job whose verdict is to be delivered again.
    struct PendingDelivery: Sendable {
        var admitted: WorkerScheduler.Admitted
        var record: KafkaProducerRecord
    }

    /// How far a job got in a lane or a stage's runner. Small on purpose: it is a slot in the async frames of every
    /// lane.
    enum Step {
        /// Decided: its verdict's record, and the verdict itself when someone waits for its delivery (boxed: the
        /// frames keep a pointer, not a verdict).
        case record(KafkaProducerRecord, AppleAnswerBox<Verdict>?)
        /// Not a job the ledger can hold (``LedgerRefusedJob``): its dead letter (boxed: a pointer in the frames).
        indirect case deadLetter(DeadLetter)
        /// Not decided (cancelled, or a fatal fault): it stays uncommitted.
        case undecided
        /// Parked in a stage, which goes on with it (and with the jobs of its key behind it).
        case parked
    }

    /// A decided job's record, or the job parked in the stage it waits for. After the ledger stage (`earlier`), a job
    /// parked for the store keeps its receipt as the ledger stage kept it.
    @inline(never)
    private func route(
        _ flow: JobFlow, job: ReceiptJob, admitted: WorkerScheduler.Admitted,
        after earlier: Parked<LedgerBoundJob>? = nil
    ) -> Step {
        switch flow {
        case .decided(let decided):
            return decidedStep(decided.verdict, job: job, message: admitted.message)
        case .consultLedger(let pending):
            ledgerStage.park(Parked(admitted: admitted, pending: pending, deflate: receiptDeflate))
            return .parked
        case .askStore(let pending):
            storeStage.park(
                earlier?.parkedAgain(pending, given: job)
                    ?? Parked(admitted: admitted, pending: pending, deflate: receiptDeflate))
            return .parked
        case .readProof:
            // No step gives a job back unread: a decider that does is wrong, and the worker must not loop on it.
            return failed(job, WorkerFatalError("a step gave back a job to read again"), message: admitted.message)
        }
    }

    /// The step of a decided job: its verdict's record, and the verdict kept for ``afterDelivery`` if it is set.
    @inline(never)
    private func decidedStep(_ verdict: Verdict, job: ReceiptJob, message: KafkaConsumerMessage) -> Step {
        let kept = afterDelivery != nil && followsUp?(verdict, job) != false
        return .record(record(of: verdict, job: job, message: message), kept ? AppleAnswerBox(verdict) : nil)
    }

    /// A job that could not be decided: refused by the ledger (its dead letter), cancelled (nothing to do), or a fatal
    /// fault (the worker stops).
    @inline(never)
    private func failed(_ job: ReceiptJob, _ error: any Error, message: KafkaConsumerMessage) -> Step {
        if let refusal = error as? LedgerRefusedJob {
            // The message's bytes were let go once decoded: the letter holds the job as the worker read it.
            let letter = DeadLetter(
                original: codec.encode(job), key: message.key, reason: "ledger_refused", error: refusal.description,
                sourceTopic: message.topic, sourcePartition: message.partition, sourceOffset: message.offset)
            metrics.deadLetter(reason: letter.reason)
            return .deadLetter(letter)
        }
        guard let fatal = error as? WorkerFatalError else { return .undecided }
        stop(because: fatal.description, metadata: [LogKeys.error: "\(fatal)", LogKeys.jobID: "\(job.jobID)"])
        return .undecided
    }

    /// A fault the worker cannot work around: marks it not ready and asks its owner to drain and exit (once).
    @inline(never)
    private func stop(because reason: String, metadata: Logger.Metadata) {
        if health.fail(reason) {
            logger.critical("worker: fatal fault, stopping", metadata: metadata)
            onFatal(reason)
        }
    }

    /// The verdict's record, counted and logged.
    @inline(never)
    private func record(of verdict: Verdict, job: ReceiptJob, message: KafkaConsumerMessage) -> KafkaProducerRecord {
        metrics.verdict(verdict, submittedAt: job.submittedAt)
        logger.debug(
            "job: decided",
            metadata: [
                LogKeys.jobID: "\(job.jobID)", LogKeys.partition: "\(message.partition)",
                LogKeys.offset: "\(message.offset)", LogKeys.outcome: "\(verdict.outcome.rawValue)",
                LogKeys.reason: "\(verdict.reason?.rawValue ?? "")", LogKeys.decidedBy: "\(verdict.decidedBy.rawValue)",
            ])
        return KafkaProducerRecord(
            topic: configuration.topics.verdicts, key: Array(verdict.accountID.utf8), value: codec.encode(verdict))
    }

    /// How a delivery ended.
    enum DeliveryOutcome {
        /// Stored: a delivery report with an offset came back.
        case delivered
        /// Refused for good (`KafkaError.isPermanent`): the same record can never be delivered.
        case refused(KafkaError)
        /// Cancelled (a revoke or a drain), or the producer failed for good and the worker is stopping.
        case abandoned
    }

    /// Delivers a decided job's verdict, then (delivered) tells ``afterDelivery``, which the job's completion awaits.
    /// Returns whether the job is done: its verdict delivered and ``afterDelivery``'s part finished.
    @inline(never)
    private func deliverVerdict(
        _ record: KafkaProducerRecord, _ verdict: AppleAnswerBox<Verdict>?, of job: ReceiptJob
    ) async -> Bool {
        let delivered = await deliverVerdict(record)
        if delivered, let verdict, let afterDelivery { return await afterDelivery(verdict.value, job) }
        return delivered
    }

    /// A decided job's verdict, nobody waiting for its delivery (``afterDelivery`` unset): handed to the producer
    /// without this task waiting for the report, which ends the job on the producer's thread; one not proven stored
    /// is delivered again by the delivery stage's runners, the waiting way. Returns false when the producer could not
    /// take it at once: the caller delivers it the waiting way itself.
    ///
    /// A task waiting per verdict, resumed by its report, cost a third of the worker CPU of a locally decided job.
    @inline(never)
    private func deliverLater(_ record: KafkaProducerRecord, admitted: WorkerScheduler.Admitted) -> Bool {
        let ticket = deliveries.begin(at: clock.now)
        let sent = producer.sendConfirmedLater(record) { [self] outcome in
            if case .success = outcome {
                done(admitted, processed: true, delivered: true)
            } else {
                deliveryStage.park(PendingDelivery(admitted: admitted, record: record))
            }
            // Last: the end of ``run()`` waits for every delivery to end before it ends the jobs left.
            deliveries.end(ticket)
        }
        if !sent { deliveries.end(ticket) }
        return sent
    }

    /// Delivers a verdict. One the cluster refuses for good (the topic unknown or not writable, the record too large)
    /// stops the worker: a verdict cannot be cut or dropped, and retrying would stall the partition for ever while
    /// the worker looked ready. Its job stays uncommitted for the next owner, once the cause is fixed.
    @inline(never)
    private func deliverVerdict(_ record: KafkaProducerRecord) async -> Bool {
        switch await deliver(record) {
        case .delivered:
            return true
        case .abandoned:
            return false
        case .refused(let error):
            stop(
                because: "kafka: a verdict cannot be delivered to \(record.topic): \(error.code.name)",
                metadata: [LogKeys.topic: "\(record.topic)", LogKeys.error: "\(error)"])
            return false
        }
    }

    /// Delivers a dead letter, cut to fit when it must (``fittingForm(_:)``): a message that is not a job always ends
    /// as a dead letter, never as a partition that stalls. Refused as too large, it goes once more as
    /// ``minimalForm(_:)``; any other refusal, or the last form refused, stops the worker (its job stays uncommitted).
    @inline(never)
    private func deliver(_ letter: DeadLetter) async -> Bool {
        let metadata: Logger.Metadata = [
            LogKeys.partition: "\(letter.sourcePartition)", LogKeys.offset: "\(letter.sourceOffset)",
            LogKeys.topic: "\(configuration.topics.deadLetters)",
        ]
        var form = fittingForm(letter)
        var isLast = false
        while true {
            if let truncation = form.truncation {
                metrics.deadLetterTruncated.increment()
                logger.notice(
                    "job: dead letter too large for one record, sent with its value cut",
                    metadata: metadata.merging(
                        [
                            LogKeys.deadLetterOriginalBytes: "\(truncation.originalBytes)",
                            LogKeys.deadLetterValueBytes: "\(form.original.count)",
                        ],
                        uniquingKeysWith: { $1 }))
            }
            let error: KafkaError
            switch await deliver(deadLetterRecord(form)) {
            case .delivered: return true
            case .abandoned: return false
            case .refused(let refusal): error = refusal
            }
            let errorMetadata = metadata.merging([LogKeys.error: "\(error)"], uniquingKeysWith: { $1 })
            if error.isRecordTooLarge, !isLast {
                isLast = true
                let minimal = minimalForm(letter)
                if minimal != form {
                    logger.warning(
                        "kafka: dead letter refused as too large; sending it smaller", metadata: errorMetadata)
                    form = minimal
                    continue
                }
            }
            stop(
                because: "kafka: a dead letter cannot be delivered to \(configuration.topics.deadLetters): "
                    + error.code.name,
                metadata: errorMetadata)
            return false
        }
    }

    /// Produces until delivered with proof (the idempotent producer makes resending safe), refused for good, or
    /// cancelled; if the producer failed for good the worker stops (the job stays uncommitted, and a restarted worker
    /// gets a new producer). Only a delivery report with an offset counts
    /// (``KafkaProducer/sendConfirmed(_:attempts:)``): the offset of the job is committed only once its output is
    /// known to be stored. A delivery not proven within the delivery timeout makes the worker unready
    /// (``checkOverdueOutputs()``) and goes on with backoff: the cause (a broker down, acknowledgements without an
    /// offset) may pass, and the job is never committed without its output.
    private func deliver(_ record: KafkaProducerRecord) async -> DeliveryOutcome {
        let ticket = deliveries.begin(at: clock.now)
        defer { deliveries.end(ticket) }
        var backoff = Duration.milliseconds(50)
        while !Task.isCancelled {
            do {
                _ = try await producer.sendConfirmed(record)
                return .delivered
            } catch {
                if let outcome = deliveryFailed(record, error) { return outcome }
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(2))
            }
        }
        return .abandoned
    }

    /// What a failed send of `record` means: abandoned (the producer failed for good, the worker stops), refused for
    /// good, or nil: send again (logged). Not inlined: its locals would be slots in the async frame of every delivery,
    /// which is allocated for every job.
    @inline(never)
    private func deliveryFailed(_ record: KafkaProducerRecord, _ error: any Error) -> DeliveryOutcome? {
        if let error = error as? KafkaError, error.isFatal {
            // librdkafka 2.0.x raises this for a lost idempotence sequence ("sequence desynchronization"):
            // no send of this producer can succeed any more.
            stop(because: "kafka producer failed for good: \(error)", metadata: [LogKeys.error: "\(error)"])
            return .abandoned
        }
        if let error = error as? KafkaError, error.isPermanent { return .refused(error) }
        logger.warning(
            "kafka: output not delivered, retrying",
            metadata: [LogKeys.topic: "\(record.topic)", LogKeys.error: "\(error)"])
        return nil
    }

    /// Counts the outputs not proven delivered within the delivery timeout into the worker's health (unready while
    /// there is one), logging when that starts and ends.
    private func checkOverdueOutputs() {
        let overdue = deliveries.count(startedBefore: clock.now.advanced(by: .zero - configuration.deliveryTimeout))
        let before = health.outputsOverdue(overdue)
        if overdue > 0, before == 0 {
            logger.error(
                "kafka: outputs not proven delivered within the delivery timeout; not ready, still trying",
                metadata: [
                    LogKeys.overdueOutputs: "\(overdue)", LogKeys.deliveryTimeout: "\(configuration.deliveryTimeout)",
                ])
        } else if overdue == 0, before > 0 {
            logger.notice("kafka: overdue outputs delivered or given back; ready again as far as delivery goes")
        }
    }

    // MARK: Kafka plumbing

    /// Reads the committed offsets the consumer could not read at assignment, with backoff until it can (or the
    /// partitions were assigned anew or taken away), and has the scheduler check where those partitions started:
    /// one read from past its commit (librdkafka can resume at a position left from an earlier assignment) is read
    /// again from the commit. Until then nothing of those partitions is committed.
    private func learnStarts(of partitions: Set<KafkaTopicPartition>, assignment: UInt64) async {
        var backoff = Duration.milliseconds(100)
        var failures = 0
        while !Task.isCancelled {
            let waiting = partitions.filter { scheduler.awaitsStart($0, assignment: assignment) }
            guard !waiting.isEmpty else { return }
            do {
                let committed = try await consumer.committedOffsets(for: Array(waiting), timeout: .seconds(5))
                for rewind in scheduler.startsLearned(committed, assignment: assignment) {
                    metrics.offsetGaps.increment()
                    logger.warning(
                        "kafka: a partition started past its committed offset, read late; reading it again from there",
                        metadata: [
                            LogKeys.partition: "\(rewind.topicPartition.partition)",
                            LogKeys.expectedOffset: "\(rewind.offset)",
                        ])
                    consumer.rewind(rewind.topicPartition, to: rewind.offset)
                }
                if failures > 0 {
                    logger.notice("kafka: committed offsets read after \(failures) failed attempts; commits resume")
                }
                return
            } catch {
                failures += 1
                // Once, then every 10th: a coordinator down for minutes would otherwise fill the log.
                if failures == 1 || failures % 10 == 0 {
                    logger.warning(
                        "kafka: committed offsets still not readable; those partitions are not committed meanwhile",
                        metadata: [LogKeys.error: "\(error)", LogKeys.kafkaAttempts: "\(failures)"])
                }
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    private func apply(_ action: FlowControl.Action) {
        // Called twice per job: the assignment (a lock and a copy) only when there is something to do.
        if action == .none { return }
        let assignment = Array(consumer.assignment)
        do {
            switch action {
            case .none: return
            case .pause: try consumer.pause(assignment)
            case .resume: try consumer.resume(assignment)
            }
        } catch {
            logger.warning("kafka: pause or resume failed", metadata: [LogKeys.error: "\(error)"])
        }
    }

    private func commitPeriodically() async {
        var wakeUpsCounted = 0
        var resendsCounted = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: configuration.commitInterval)
            let wakeUps = consumer.fetchWakeUps
            if wakeUps > wakeUpsCounted {
                metrics.fetchWakeUps.increment(by: Int64(wakeUps - wakeUpsCounted))
                wakeUpsCounted = wakeUps
            }
            // The producer may be shared (throttle signals), so this counts its resends whoever sent.
            let resends = producer.confirmationResends
            if resends > resendsCounted {
                metrics.produceResends.increment(by: Int64(resends - resendsCounted))
                resendsCounted = resends
            }
            checkOverdueOutputs()
            metrics.parkedForLedger.record(ledgerStage.parkedCount)
            metrics.parkedForApple.record(storeStage.parkedCount)
            let commits = scheduler.takeCommits()
            for (partition, lag) in scheduler.uncommitted() {
                metrics.commitLag(partition: partition.partition, lag)
            }
            guard !commits.isEmpty else { continue }
            do {
                try consumer.commitAsync(commits)
            } catch {
                logger.warning("kafka: commit failed", metadata: [LogKeys.error: "\(error)"])
            }
        }
    }

    /// The revoke hook: no new work from those partitions, running jobs finish, then commit where they end. Only
    /// the assignment being revoked is touched: a hook past its deadline may run after the same partitions were
    /// assigned again.
    private static func handBack(
        _ revoked: KafkaRevocation, scheduler: WorkerScheduler, consumer: KafkaConsumer, logger: Logger
    ) async {
        let (revocation, flow) = scheduler.beginRevoke(revoked.partitions, assignment: revoked.generation)
        if flow == .resume {
            try? consumer.resume(Array(consumer.assignment))
        }
        await scheduler.waitUntilIdle(revocation)
        let commits = scheduler.endRevoke(revocation)
        guard !commits.isEmpty else { return }
        do {
            try await consumer.commit(commits)
        } catch {
            logger.warning("kafka: commit on revoke failed", metadata: [LogKeys.error: "\(error)"])
        }
    }
}

extension KafkaConsumerMessage {
    /// The record's timestamp as a date, if the broker gave one.
    var recordedAt: Date? {
        timestampMilliseconds.map { Date(epochMilliseconds: Int64($0)) }
    }

    /// The message without its value and headers: what the scheduler needs (partition, offset, key, timestamp).
    var withoutPayload: KafkaConsumerMessage {
        var stripped = self
        stripped.value = nil
        stripped.headers = []
        return stripped
    }
}

/// A value passed once from one task to another: taking it leaves the box empty, so the box (captured by a task's
/// closure) does not keep the value alive after the receiver is done with it.
final class Handoff<Value: Sendable>: Sendable {
    private let value: Mutex<Value?>

    init(_ value: Value) { self.value = Mutex(value) }

    /// The value the first time; nil after.
    func take() -> Value? { value.withLock { $0.take() } }
}

/// Holds a consumer for its own revoke hook.
final class ConsumerSlot: Sendable {
    let consumer = Mutex<KafkaConsumer?>(nil)
}

/// The worker's metrics (names in ``MetricNames``).
struct WorkerMetrics: Sendable {
    let consumed = Counter(label: MetricNames.jobsConsumed)
    let inFlight = Gauge(label: MetricNames.inFlight)
    let assignedPartitions = Gauge(label: MetricNames.assignedPartitions)
    let offsetGaps = Counter(label: MetricNames.offsetGaps)
    let fetchWakeUps = Counter(label: MetricNames.fetchWakeUps)
    let produceResends = Counter(label: MetricNames.produceResends)
    let deadLetterTruncated = Counter(label: MetricNames.deadLettersTruncated)
    let parkedForLedger = Gauge(label: MetricNames.parkedJobs, dimensions: [("stage", "ledger")])
    let parkedForApple = Gauge(label: MetricNames.parkedJobs, dimensions: [("stage", "apple")])

    /// A verdict's labels: a value, not an array allocated per verdict.
    private struct VerdictLabels: Hashable, Sendable {
        var outcome: String
        var reason: String
        var decidedBy: String
    }

    /// By outcome, reason and stage.
    private let verdicts = MetricCache<VerdictLabels, Counter> { key in
        Counter(
            label: MetricNames.verdicts,
            dimensions: [("outcome", key.outcome), ("reason", key.reason), ("decided_by", key.decidedBy)])
    }
    private let verdictLatency = MetricCache<String, Timer> { Timer(label: $0) }

    func verdict(_ verdict: Verdict, submittedAt: Date?) {
        verdicts[
            VerdictLabels(
                outcome: verdict.outcome.rawValue, reason: verdict.reason?.rawValue ?? "none",
                decidedBy: verdict.decidedBy.rawValue)
        ].increment()
        if let submittedAt {
            let seconds = max(0, Date().timeIntervalSince(submittedAt))
            verdictLatency[MetricNames.verdictLatency].recordNanoseconds(Int64(min(seconds, 1e9) * 1e9))
        }
    }

    func deadLetter(reason: String) {
        Counter(label: MetricNames.deadLetters, dimensions: [("reason", reason)]).increment()
    }

    func commitLag(partition: Int32, _ lag: Int64) {
        Gauge(label: MetricNames.commitLag, dimensions: [("partition", String(partition))]).record(lag)
    }
}
