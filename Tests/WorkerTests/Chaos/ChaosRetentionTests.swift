import ArgumentParser
import Foundation
import Testing

@testable import Chaos
@testable import Kafka

/// The harness's own bookkeeping against the mock broker's 5 MiB per partition: holes in what the reader read,
/// unsettled messages below a low watermark (harness errors, not lost jobs), and the submitter's window.
@Suite("Chaos: retention and flow control")
struct ChaosRetentionTests {
    static let verdicts = KafkaTopicPartition(topic: "receipt-verdicts", partition: 3)

    @Test("A jump in a partition's offsets is a hole; reading an offset again is not")
    func holes() {
        let tracker = ChaosOffsetTracker()
        for offset: Int64 in [0, 1, 2, 1, 5, 6] { tracker.read(Self.verdicts, offset: offset) }
        #expect(tracker.next[Self.verdicts] == 7)
        let holes = tracker.holes
        #expect(holes.count == 1)
        #expect(holes.first?.kind == .readerSkipped)
        #expect(holes.first?.detail.contains("offsets 3..<5") == true)
    }

    @Test("A partition that starts past 0 was trimmed before the reader came")
    func trimmedBeforeFirstRead() {
        let tracker = ChaosOffsetTracker()
        tracker.read(Self.verdicts, offset: 40)
        #expect(
            tracker.holes.map(\.detail) == [
                "receipt-verdicts[3]: offsets 0..<40 deleted by the broker before the reader read them"
            ])
    }

    @Test("Only unsettled messages below their partition's low watermark are harness errors")
    func deletedBeforeSettled() {
        let deliveries = [
            ChaosDeliveryLog.Entry(jobID: "settled", deadLetterKey: "k1", partition: 0, offset: 3),
            ChaosDeliveryLog.Entry(jobID: "lost", deadLetterKey: "k2", partition: 0, offset: 4),
            ChaosDeliveryLog.Entry(jobID: "waiting", deadLetterKey: "k3", partition: 0, offset: 12),
            ChaosDeliveryLog.Entry(jobID: nil, deadLetterKey: "bad", partition: 1, offset: 0),
        ]
        let read = KafkaTopicPartition(topic: "receipt-jobs-dlq", partition: 1)
        let (errors, deleted) = ChaosRetentionCheck.check(
            deliveries: deliveries,
            jobWatermarks: [0: KafkaWatermarks(low: 10, high: 20), 1: KafkaWatermarks(low: 1, high: 2)],
            unsettled: (jobs: ["lost", "waiting"], deadLetters: ["bad"]),
            readerNext: [read: 5, Self.verdicts: 9],
            readWatermarks: [read: KafkaWatermarks(low: 8, high: 9), Self.verdicts: KafkaWatermarks(low: 2, high: 9)])
        #expect(deleted.jobs == ["lost"])
        #expect(deleted.deadLetters == ["bad"])
        #expect(errors.filter { $0.kind == .deletedBeforeSettled }.count == 2)
        // The reader stopped at 5 on a partition that keeps only 8..<9: it can never read 5...7.
        #expect(
            errors.filter { $0.kind == .readerSkipped }.map(\.detail) == [
                "receipt-jobs-dlq[1]: the reader stopped at 5, the broker keeps only 8..<9"
            ])
    }

    @Test("The window counts unsettled bytes and frees them when the message settles", .timeLimit(.minutes(2)))
    func window() async {
        let tally = ChaosTally(expectedJobs: [], expectedDeadLetters: ["a", "b"])
        tally.submitting(jobID: nil, deadLetterKey: "a", bytes: 600)
        tally.submitting(jobID: nil, deadLetterKey: "b", bytes: 500)
        #expect(tally.outstandingBytes == 1_100)
        async let room = tally.waitForRoom(limit: 600, within: .seconds(50))
        tally.received(deadLetterKey: "a", reason: "not_json")
        #expect(await room)
        #expect(tally.outstandingBytes == 500)
        #expect(tally.unsettled.deadLetters == ["b"])
        // A message whose identity already settled adds nothing.
        tally.submitting(jobID: nil, deadLetterKey: "a", bytes: 900)
        #expect(tally.outstandingBytes == 500)
    }

    @Test("A wait for room gives up after its limit")
    func windowTimesOut() async {
        let tally = ChaosTally(expectedJobs: [], expectedDeadLetters: ["a"])
        tally.submitting(jobID: nil, deadLetterKey: "a", bytes: 600)
        #expect(!(await tally.waitForRoom(limit: 100, within: .milliseconds(1))))
    }

    @Test("Partitions follow the planned volume: 20 MiB each, between 12 and 64")
    func partitionsFromVolume() {
        #expect(ChaosEnvironment.partitions(forPlannedBytes: 1 << 20) == 12)
        #expect(ChaosEnvironment.partitions(forPlannedBytes: 500 << 20) == 25)
        #expect(ChaosEnvironment.partitions(forPlannedBytes: 10 << 30) == 64)
    }
}

@Suite("Chaos: command line")
struct ChaosCommandLineTests {
    @Test("--only-faults takes known fault names and refuses others by name")
    func onlyFaults() throws {
        let command = try ChaosArguments.parse(["--only-faults", "broker_errors, kill_worker"])
        #expect(command.onlyFaults == "broker_errors, kill_worker")
        #expect(Set(ChaosConfiguration.faultNames).isSuperset(of: ["broker_errors", "kill_worker"]))
        #expect(throws: (any Error).self) {
            _ = try ChaosArguments.parse(["--only-faults", "broker_errors,meteor"])
        }
    }
}
