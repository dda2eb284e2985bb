import Foundation
import Kafka
import Logging
import Messages

/// The logic of `verify-worker submit`: jobs in, each produced to `receipt-jobs` keyed by `account_id` and its
/// delivery report awaited; one JSON line out per job, in the order the reports arrive.
///
/// - Many sends are outstanding at once (`maximumOutstanding`), but never two of one account: a job waits for the
///   earlier job of its account, so each account's jobs reach Kafka in input order (the worker decides them in
///   that order).
/// - `rate` paces sends (jobs per second) without drift: job i leaves no earlier than start + i / rate.
public struct JobSubmitter: Sendable {
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
    /// Receives every output line (without its newline).
    public var output: @Sendable (String) -> Void

    public init(
        producer: KafkaProducer, topic: String = Topics.jobs, codec: MessageCodec = MessageCodec(),
        maximumOutstanding: Int = 1_000, rate: Double? = nil, output: @escaping @Sendable (String) -> Void
    ) {
        self.producer = producer
        self.topic = topic
        self.codec = codec
        self.maximumOutstanding = max(1, maximumOutstanding)
        self.rate = rate
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
                    let message = KafkaProducerRecord(
                        topic: topic, key: job.messageKey, value: codec.encode(job))
                    let producer = self.producer
                    group.addTask {
                        do {
                            let report = try await producer.sendConfirmed(message)
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
