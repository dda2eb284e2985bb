import Testing

@testable import Kafka
@testable import Worker

/// The consumer gives partitions back once the revoke hook's deadline passes, whether or not the hook finished, or
/// even started (on a busy machine its task can wait seconds for a thread). The group may then assign the same
/// partitions to this worker again before the hook runs. Such a late hook used to mark the new assignment as
/// revoked (its messages ignored for good) or forget its offsets (its waiting jobs skipped and committed past):
/// jobs without a verdict. The hook now names the assignment it revokes.
@Suite("Pipeline: a revoke hook that runs late", .timeLimit(.minutes(2)))
struct LateRevokeTests {
    private static let partition = KafkaTopicPartition(topic: "jobs", partition: 0)

    private static func message(_ offset: Int64, key: String) -> KafkaConsumerMessage {
        KafkaConsumerMessage(
            topicPartition: partition, offset: offset, key: Array(key.utf8), value: [], headers: [],
            timestampMilliseconds: nil)
    }

    /// "ready N" (taken, to start now), "waiting" (taken, behind its key), "ignored" or "gap N".
    private static func outcome(_ admission: WorkerScheduler.Admission) -> String {
        switch admission {
        case .taken(let ready?, _): "ready \(ready.message.offset)"
        case .taken(nil, _): "waiting"
        case .ignored: "ignored"
        case .gap(let expected): "gap \(expected)"
        }
    }

    /// The job a message is taken as, to start now.
    private static func ready(_ admission: WorkerScheduler.Admission) throws -> WorkerScheduler.Admitted {
        guard case .taken(let ready?, _) = admission else {
            throw LateRevokeTestFailure("expected a job to start, got \(outcome(admission))")
        }
        return ready
    }

    @Test("a hook for an earlier assignment leaves the new one alone: its jobs run and its offsets are committed")
    func lateHookAfterReassignment() async throws {
        let scheduler = WorkerScheduler(maximumInFlight: 100)
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 0], assignment: 1)
        let old = try Self.ready(scheduler.admit(Self.message(0, key: "x")))
        #expect(scheduler.beginProcessing(old))

        // The hook of assignment 1 missed its deadline; the group assigned the partition again from offset 0.
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 0], assignment: 2)
        let first = try Self.ready(scheduler.admit(Self.message(0, key: "a")))
        // Offset 1 has the same key: it waits behind offset 0.
        #expect(Self.outcome(scheduler.admit(Self.message(1, key: "a"))) == "waiting")
        #expect(scheduler.beginProcessing(first))

        // Now the late hook runs.
        let (revocation, _) = scheduler.beginRevoke([Self.partition], assignment: 1)
        #expect(revocation.partitions.isEmpty)
        await scheduler.waitUntilIdle(revocation)
        #expect(scheduler.endRevoke(revocation).isEmpty)

        // The new assignment goes on: new messages are taken, the waiting job starts, offsets are committed.
        #expect(Self.outcome(scheduler.admit(Self.message(2, key: "b"))) == "ready 2")
        let next = try #require(scheduler.complete(first, processed: true, delivered: true).next)
        #expect(next.message.offset == 1)
        #expect(scheduler.beginProcessing(next))
        _ = scheduler.complete(next, processed: true, delivered: true)
        #expect(scheduler.takeCommits().map(\.offset) == [2])
        // The old assignment's job ending late moves nothing.
        _ = scheduler.complete(old, processed: true, delivered: true)
        #expect(scheduler.takeCommits().isEmpty)
    }

    @Test("a hook on time holds its partitions back, waits for their running jobs and commits where they end")
    func hookOnTime() async throws {
        let scheduler = WorkerScheduler(maximumInFlight: 100)
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 0], assignment: 7)
        let zero = try Self.ready(scheduler.admit(Self.message(0, key: "a")))
        let one = try Self.ready(scheduler.admit(Self.message(1, key: "b")))
        #expect(Self.outcome(scheduler.admit(Self.message(2, key: "b"))) == "waiting")
        #expect(scheduler.beginProcessing(zero) && scheduler.beginProcessing(one))
        _ = scheduler.complete(zero, processed: true, delivered: true)

        let (revocation, _) = scheduler.beginRevoke([Self.partition], assignment: 7)
        #expect(revocation.partitions == [Self.partition])
        // Nothing more is taken; the job waiting behind offset 1 was dropped (the next owner reads it).
        #expect(Self.outcome(scheduler.admit(Self.message(3, key: "c"))) == "ignored")
        async let idle: Void = scheduler.waitUntilIdle(revocation)
        #expect(scheduler.complete(one, processed: true, delivered: true).next == nil)
        await idle
        #expect(scheduler.endRevoke(revocation).map(\.offset) == [2])
    }

    @Test("a drain names no assignment and holds back every partition as it is now")
    func drainRevokesCurrent() {
        let scheduler = WorkerScheduler(maximumInFlight: 100)
        scheduler.assigned([Self.partition], startingAt: [Self.partition: 0], assignment: 3)
        let (revocation, _) = scheduler.beginRevoke([Self.partition])
        #expect(revocation.partitions == [Self.partition])
        #expect(Self.outcome(scheduler.admit(Self.message(0, key: "a"))) == "ignored")
    }
}

struct LateRevokeTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
