import Foundation
import Kafka
import Logging
import Messages

/// The one job submitter: puts jobs on `receipt-jobs` from a process that is not the worker and proves each delivery
/// by a report with an offset (`KafkaProducer.sendConfirmed`). `verify-worker submit` feeds it items; the demo, the
/// benchmarks and the chaos harness feed it chains of prepared messages (``submit(chains:spread:prepare:delivered:)``).
///
/// Items (`verify-worker submit`): jobs in, each produced keyed by `account_id` and its delivery report awaited; one
/// JSON line out per job, in the order the reports arrive.
/// - Many sends are outstanding at once (`maximumOutstanding`), but never two of one account: a job waits for the
///   earlier job of its account, so each account's jobs reach Kafka in input order (the worker decides them in
///   that order).
/// - `rate` paces sends (jobs per second) without drift: job i leaves no earlier than start + i / rate.
public struct JobSubmitter: Sendable {
    /// How ``submit(chains:spread:prepare:delivered:)`` spreads its sends over tasks.
    public struct Spread: Sendable {
        /// Lanes that prepare and send chunks side by side; lane `n` takes every `lanes`-th chunk from chunk `n`.
        public var lanes: Int
        /// Chains per task group. A group finds a finished child by walking its list of children, so one group of
        /// 20 000 sends spent most of a process's CPU on that walk (perf, `bench pipeline` (b)).
        public var chunk: Int

        public init(lanes: Int, chunk: Int) {
            self.lanes = max(1, lanes)
            self.chunk = max(1, chunk)
        }

        /// Eight lanes of 250 sends: the demo's and the benchmarks' burst, where one chunk's delivery reports are
        /// awaited while others are sent.
        public static let burst = Spread(lanes: 8, chunk: 250)
        /// One lane and one group: for a `prepare` that waits for room in a flow-control window message after
        /// message (the chaos harness).
        public static let windowed = Spread(lanes: 1, chunk: .max)
    }

    /// One thing to submit: a job (with the category it was generated as, if any) or a line that is no job.
    public enum Item: Sendable {
        case job(line: Int?, ReceiptJob, category: String?)
        case invalid(line: Int, GatewayError)
    }

    /// What happened to the input, for the summary and the exit code.
    public struct Summary: Sendable, Hashable, Encodable {
        public var submitted = 0
        public var failed = 0

        public init(submitted: Int = 0, failed: Int = 0) {
            self.submitted = submitted
            self.failed = failed
        }

        enum CodingKeys: String, CodingKey {
            case submitted
            case failed
        }
    }

    public let producer: KafkaProducer
    public let topic: String
    public var codec: MessageCodec
    public var maximumOutstanding: Int
    /// Jobs per second, or nil for as fast as Kafka takes them.
    public var rate: Double?
    /// Sends in all of a message whose delivery stays unproven (each a `sendConfirmed`, itself resending), backing off
    /// between them, as a frontend sends again after `deliveryUnproven`. Default: 1 (`verify-worker submit` reports
    /// such a job as failed and goes on).
    public var attempts: Int
    /// Receives every output line of ``submit(_:)`` (without its newline).
    public var output: @Sendable (String) -> Void

    public init(
        producer: KafkaProducer, topic: String = Topics.jobs, codec: MessageCodec = MessageCodec(),
        maximumOutstanding: Int = 1_000, rate: Double? = nil, attempts: Int = 1,
        output: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.producer = producer
        self.topic = topic
        self.codec = codec
        self.maximumOutstanding = max(1, maximumOutstanding)
        self.rate = rate
        self.attempts = max(1, attempts)
        self.output = output
    }

    /// Reads JSON lines: each non-blank line is one job in the `receipt-job/v1` shape (`schema` and `job_id`
    /// may be left out, as at the gateway). A line that is not a job is reported with its number and skipped.
    /// Lazy: a line is read only when the submitter is ready for it.
    public static func items(
        from lines: LineReader.Lines, intake: JobIntake
    ) -> AsyncCompactMapSequence<LineReader.Lines, Item> {
        lines.compactMap { line -> Item? in
            let trimmed = line.text.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { return nil }
            do throws(GatewayError) {
                return .job(line: line.number, try intake.job(fromFrontendJSON: Array(trimmed.utf8)), category: nil)
            } catch {
                return .invalid(line: line.number, error)
            }
        }
    }

    /// Submits every item and returns the counts. Cancellation stops reading; sends already started finish.
    /// Throws only what `items` throws (after the sends already started have finished and been reported).
    public func submit<Items: AsyncSequence>(_ items: Items) async throws -> Summary where Items.Element == Item {
        var summary = Summary()
        let clock = ContinuousClock()
        let start = clock.now
        var index = 0
        var inputFailure: (any Error)?
        await withTaskGroup(of: (account: String, line: String, ok: Bool).self) { group in
            var outstanding: [String: Int] = [:]
            var running = 0
            func record(_ result: (account: String, line: String, ok: Bool)) {
                running -= 1
                outstanding[result.account, default: 1] -= 1
                if outstanding[result.account] == 0 { outstanding[result.account] = nil }
                if result.ok { summary.submitted += 1 } else { summary.failed += 1 }
                output(result.line)
            }
            var iterator = items.makeAsyncIterator()
            while !Task.isCancelled {
                let next: Item?
                do {
                    next = try await iterator.next()
                } catch {
                    inputFailure = error
                    break
                }
                guard let item = next else { break }
                switch item {
                case .invalid(let line, let error):
                    summary.failed += 1
                    output(Self.errorLine(line: line, error: error.code.rawValue, message: error.message))
                case .job(let line, let job, let category):
                    while running >= maximumOutstanding || outstanding[job.accountID] != nil {
                        guard let done = await group.next() else { break }
                        record(done)
                    }
                    if let rate, rate > 0 {
                        let due = start + .seconds(Double(index) / rate)
                        if due > clock.now { try? await clock.sleep(until: due) }
                    }
                    index += 1
                    outstanding[job.accountID, default: 0] += 1
                    running += 1
                    let (key, value) = (job.messageKey, codec.encode(job))
                    group.addTask {
                        do {
                            let report = try await send(key: key, value: value)
                            return (
                                job.accountID,
                                Self.successLine(line: line, job: job, report: report, category: category), true
                            )
                        } catch {
                            let code = (error as? KafkaError)?.code.name ?? "cancelled"
                            return (
                                job.accountID,
                                Self.errorLine(line: line, jobID: job.jobID, error: "kafka_error", message: "\(code)"),
                                false
                            )
                        }
                    }
                }
            }
            while let done = await group.next() { record(done) }
        }
        if let inputFailure { throw inputFailure }
        return summary
    }

    /// Sends every chain and waits for every delivery report. The messages of one chain (message indices, in order)
    /// go one after the other, each after the previous one's report: a frontend that keeps one account's jobs in
    /// order must, or a send that is repeated would land behind its successor. Chains go concurrently.
    ///
    /// - Parameters:
    ///   - prepare: awaited for each message, in chain order within a lane, before its chain's sends start: it waits
    ///     for room or for its time, stamps and counts the message, and returns its key and value.
    ///   - delivered: called with each message's index and delivery report.
    public func submit(
        chains: [[Int]], spread: Spread,
        prepare: @escaping @Sendable (Int) async throws -> (key: [UInt8], value: [UInt8]),
        delivered: @escaping @Sendable (Int, KafkaDeliveryReport) -> Void = { _, _ in }
    ) async throws {
        let chunkStarts = Array(stride(from: 0, to: chains.count, by: spread.chunk))
        try await withThrowingDiscardingTaskGroup { lanes in
            for lane in 0..<min(spread.lanes, max(chunkStarts.count, 1)) {
                lanes.addTask {
                    for (number, chunkStart) in chunkStarts.enumerated() where number % spread.lanes == lane {
                        try await withThrowingDiscardingTaskGroup { group in
                            let end = chunkStart + min(spread.chunk, chains.count - chunkStart)
                            for chain in chains[chunkStart..<end] {
                                var messages: [(index: Int, key: [UInt8], value: [UInt8])] = []
                                for index in chain {
                                    let message = try await prepare(index)
                                    messages.append((index, message.key, message.value))
                                }
                                group.addTask {
                                    for (index, key, value) in messages {
                                        delivered(index, try await send(key: key, value: value))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Sends one message to the topic until a delivery report with an offset: `sendConfirmed` throws
    /// `deliveryUnproven` (retryable) after acknowledgements without one, and the submitter, like a frontend, sends
    /// again (up to `attempts` in all, backing off).
    public func send(key: [UInt8], value: [UInt8]) async throws -> KafkaDeliveryReport {
        let record = KafkaProducerRecord(topic: topic, key: key, value: value)
        var attempt = 1
        while true {
            do {
                return try await producer.sendConfirmed(record)
            } catch let error as KafkaError where error.isRetryable && attempt < attempts {
                attempt += 1
                try await Task.sleep(for: .milliseconds(100 * attempt))
            }
        }
    }

    static func successLine(line: Int?, job: ReceiptJob, report: KafkaDeliveryReport, category: String?) -> String {
        var object: [String: JSONScalar] = [
            "job_id": .string(job.jobID), "account_id": .string(job.accountID),
            "partition": .int(Int(report.topicPartition.partition)), "offset": .int(Int(report.offset)),
        ]
        if let line { object["line"] = .int(line) }
        if let category { object["category"] = .string(category) }
        return GatewayJSON.line(object)
    }

    static func errorLine(line: Int?, jobID: String? = nil, error: String, message: String) -> String {
        var object: [String: JSONScalar] = ["error": .string(error), "message": .string(message)]
        if let line { object["line"] = .int(line) }
        if let jobID { object["job_id"] = .string(jobID) }
        return GatewayJSON.line(object)
    }
}

/// A string or a number in a JSON line of tool output.
public enum JSONScalar: Sendable, Hashable, Encodable {
    case string(String)
    case int(Int)

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        }
    }
}
