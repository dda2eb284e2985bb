import Kafka
import Messages
import Synchronization

/// What the harness itself could not see because the mock broker deleted it first.
///
/// librdkafka's mock cluster keeps at most 5 MiB (and 100,000 message sets) per partition and deletes the oldest
/// batches beyond that (`rd_kafka_mock_msgset_new`: `max_size = 1024 * 1024 * 5`, `max_cnt = 100000`). A message
/// deleted before a worker or the harness's reader got to it then looks like a lost job or a lost verdict. These
/// records keep that apart from the invariants: they are harness errors (the run proved nothing about those
/// messages), never counted as violations of a promise.
public struct ChaosHarnessError: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The harness's reader found a hole in the offsets of a verdict or dead-letter partition.
        case readerSkipped = "reader_skipped"
        /// A submitted message had not settled and its offset is below its partition's low watermark.
        case deletedBeforeSettled = "deleted_before_settled"
        /// A partition's watermarks could not be read at the end.
        case watermarksUnavailable = "watermarks_unavailable"
        /// The submitter's window stayed full for the stall timeout: messages were not settling.
        case windowStalled = "window_stalled"
    }

    public var kind: Kind
    public var detail: String

    public var description: String { "\(kind.rawValue): \(detail)" }
}

/// The next offset the reader expects on each partition it reads; any jump forward is a hole (in a topic without
/// compaction or transactions, offsets are consecutive, so a hole means the broker deleted messages unread).
final class ChaosOffsetTracker: Sendable {
    private struct State {
        var next: [KafkaTopicPartition: Int64] = [:]
        var holes: [(partition: KafkaTopicPartition, from: Int64, to: Int64)] = []
    }

    private let state = Mutex(State())

    func read(_ partition: KafkaTopicPartition, offset: Int64) {
        state.withLock { state in
            let expected = state.next[partition] ?? 0
            if offset > expected { state.holes.append((partition, expected, offset)) }
            state.next[partition] = max(expected, offset + 1)
        }
    }

    /// The next offset to read per partition (0 for a partition never read).
    var next: [KafkaTopicPartition: Int64] { state.withLock { $0.next } }

    var holes: [ChaosHarnessError] {
        state.withLock { state in
            state.holes.map {
                ChaosHarnessError(
                    kind: .readerSkipped,
                    detail:
                        "\($0.partition): offsets \($0.from)..<\($0.to) deleted by the broker before the reader read them"
                )
            }
        }
    }
}

/// Where each submitted message was stored (from its delivery report), and how many bytes went to each partition.
final class ChaosDeliveryLog: Sendable {
    struct Entry: Sendable {
        var jobID: String?
        var deadLetterKey: String
        var partition: Int32
        var offset: Int64
    }

    private struct State {
        var entries: [Entry] = []
        var bytes: [Int32: Int] = [:]
    }

    private let state = Mutex(State())

    func delivered(_ entry: Entry, bytes: Int) {
        state.withLock {
            $0.entries.append(entry)
            $0.bytes[entry.partition, default: 0] += bytes
        }
    }

    var entries: [Entry] { state.withLock { $0.entries } }

    /// The most bytes produced to one `receipt-jobs` partition.
    var largestPartitionBytes: Int { state.withLock { $0.bytes.values.max() ?? 0 } }
}

/// The end-of-run check: each partition's low watermark against what the harness still needed.
enum ChaosRetentionCheck {
    /// Harness errors, and the job ids and dead-letter keys the broker deleted before they settled.
    typealias Outcome = (errors: [ChaosHarnessError], deleted: (jobs: Set<String>, deadLetters: Set<String>))

    /// - Parameters:
    ///   - jobWatermarks: `receipt-jobs` partition → watermarks.
    ///   - unsettled: job ids and dead-letter keys submitted and never settled.
    ///   - readerNext/readWatermarks: for the verdict and dead-letter topics, the reader's next offset and the
    ///     broker's watermarks per partition.
    static func check(
        deliveries: [ChaosDeliveryLog.Entry], jobWatermarks: [Int32: KafkaWatermarks],
        unsettled: (jobs: Set<String>, deadLetters: Set<String>),
        readerNext: [KafkaTopicPartition: Int64], readWatermarks: [KafkaTopicPartition: KafkaWatermarks]
    ) -> Outcome {
        var errors: [ChaosHarnessError] = []
        var deletedJobs = Set<String>()
        var deletedLetters = Set<String>()
        for entry in deliveries {
            let waiting =
                entry.jobID.map { unsettled.jobs.contains($0) } ?? unsettled.deadLetters.contains(entry.deadLetterKey)
            guard waiting, let marks = jobWatermarks[entry.partition], entry.offset < marks.low else { continue }
            if let jobID = entry.jobID { deletedJobs.insert(jobID) } else { deletedLetters.insert(entry.deadLetterKey) }
            errors.append(
                ChaosHarnessError(
                    kind: .deletedBeforeSettled,
                    detail:
                        "\(entry.jobID.map { "job \($0)" } ?? "message \(entry.deadLetterKey)") at "
                        + "\(Topics.jobs)[\(entry.partition)]@\(entry.offset), below the low watermark \(marks.low), "
                        + "never settled"))
        }
        for (partition, marks) in readWatermarks.sorted(by: { $0.key.description < $1.key.description }) {
            let next = readerNext[partition] ?? 0
            if next < marks.low {
                errors.append(
                    ChaosHarnessError(
                        kind: .readerSkipped,
                        detail: "\(partition): the reader stopped at \(next), the broker keeps only \(marks)"))
            }
        }
        return (errors, (deletedJobs, deletedLetters))
    }
}
