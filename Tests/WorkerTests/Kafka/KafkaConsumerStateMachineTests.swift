import Testing

@testable import Kafka

/// The consumer's assignment, pause, rewind and revoke state, without librdkafka.
@Suite("Kafka: consumer state machine")
struct KafkaConsumerStateMachineTests {
    let p0 = KafkaTopicPartition(topic: "jobs", partition: 0)
    let p1 = KafkaTopicPartition(topic: "jobs", partition: 1)
    let p2 = KafkaTopicPartition(topic: "jobs", partition: 2)

    func offset(_ partition: KafkaTopicPartition, _ offset: Int64) -> KafkaCommitOffset {
        KafkaCommitOffset(topicPartition: partition, offset: offset)
    }

    func generation(of event: KafkaConsumerEvent) -> UInt64? {
        if case .partitionsAssigned(_, _, _, let generation) = event { return generation }
        return nil
    }

    @Test("An assignment is numbered, announced with its starting offsets, and fetched from them")
    func assignment() {
        var state = ConsumerStateMachine()
        let first = state.assigned([p0, p1], startingOffsets: [p0: 7], startsUnknown: [p1])
        guard case .partitionsAssigned(let partitions, let starts, let unknown, 1) = first else {
            Issue.record("expected the first assignment, got \(first)")
            return
        }
        #expect(partitions == [p0, p1] && starts == [p0: 7] && unknown == [p1])
        #expect(state.assignment == [p0, p1])
        #expect(Set(state.fetching) == [offset(p0, 7), offset(p1, -1)])
        _ = state.revokeRequested([p0, p1])
        _ = state.revokeFinished([p0, p1])
        #expect(generation(of: state.assigned([p2], startingOffsets: [:], startsUnknown: [])) == 2)
        #expect(state.assignment == [p2])
    }

    @Test("A pause stops fetching an assigned partition; a new assignment starts unpaused")
    func pauses() {
        var state = ConsumerStateMachine()
        _ = state.assigned([p0, p1], startingOffsets: [:], startsUnknown: [])
        state.pauseApplied([p0, p2], paused: true)
        #expect(state.fetching.map(\.topicPartition) == [p1])
        state.pauseApplied([p0], paused: false)
        #expect(Set(state.fetching.map(\.topicPartition)) == [p0, p1])
        state.pauseApplied([p1], paused: true)
        _ = state.revokeRequested([p0, p1])
        _ = state.revokeFinished([p0, p1])
        _ = state.assigned([p1, p2], startingOffsets: [:], startsUnknown: [])
        // p2 was paused while not assigned, p1 in the previous assignment: both are fetched now.
        #expect(Set(state.fetching.map(\.topicPartition)) == [p1, p2])
    }

    @Test("Revoking while paused: the hook is told the generation, buffered messages go, the pause ends")
    func revokeWhilePaused() {
        var state = ConsumerStateMachine()
        _ = state.assigned([p0, p1], startingOffsets: [p0: 3], startsUnknown: [])
        state.pauseApplied([p0], paused: true)
        let action = state.revokeRequested([p0, p1])
        #expect(action.discardBuffered == [p0, p1])
        #expect(action.revocation?.partitions == [p0, p1])
        #expect(action.revocation?.generation == 1)
        // While the hook runs the partitions are still assigned (its commits are accepted).
        #expect(state.assignment == [p0, p1])
        let announcement = state.revokeFinished([p0, p1])
        guard case .partitionsRevoked(let revoked) = announcement else {
            Issue.record("expected a revocation, got \(announcement)")
            return
        }
        #expect(revoked == [p0, p1])
        #expect(state.assignment.isEmpty && state.fetching.isEmpty)
        state.pauseApplied([p0], paused: true)
        _ = state.assigned([p0], startingOffsets: [:], startsUnknown: [])
        #expect(state.fetching == [offset(p0, -1)])
    }

    @Test("Revoking nothing runs no hook")
    func emptyRevocation() {
        var state = ConsumerStateMachine()
        let action = state.revokeRequested([])
        #expect(action.revocation == nil && action.discardBuffered.isEmpty)
        _ = state.revokeFinished([])
        #expect(state.assignment.isEmpty)
    }

    @Test("Rewinds: the latest per partition wins, taking them empties the queue, a failed one comes back")
    func rewinds() {
        var state = ConsumerStateMachine()
        _ = state.assigned([p0, p1], startingOffsets: [:], startsUnknown: [])
        let accepted = [offset(p1, 10), offset(p0, 5), offset(p0, 4)].map { state.rewindRequested($0) }
        #expect(accepted == [true, true, true])
        #expect(state.hasPendingRewinds)
        var taken = state.takePendingRewinds()
        #expect(taken == [offset(p0, 4), offset(p1, 10)])
        #expect(!state.hasPendingRewinds)
        state.rewindFailed(offset(p0, 4))
        taken = state.takePendingRewinds()
        #expect(taken == [offset(p0, 4)])
        // A newer request made while the seek failed replaces the failed one.
        state.rewindRequested(offset(p0, 2))
        state.rewindFailed(offset(p0, 4))
        taken = state.takePendingRewinds()
        #expect(taken == [offset(p0, 2)])
    }

    @Test("A rewind of a partition not assigned is refused")
    func rewindNotAssigned() {
        var state = ConsumerStateMachine()
        var accepted = state.rewindRequested(offset(p0, 1))
        #expect(!accepted)
        _ = state.assigned([p1], startingOffsets: [:], startsUnknown: [])
        accepted = state.rewindRequested(offset(p0, 1))
        #expect(!accepted)
        #expect(!state.hasPendingRewinds)
    }

    @Test("Rewinds during a revocation: pending ones are dropped, new ones refused, failed ones not retried")
    func rewindDuringRevoke() {
        var state = ConsumerStateMachine()
        _ = state.assigned([p0, p1], startingOffsets: [:], startsUnknown: [])
        state.rewindRequested(offset(p1, 9))
        let inFlight = state.takePendingRewinds()
        state.rewindRequested(offset(p0, 7))
        _ = state.revokeRequested([p0, p1])
        #expect(!state.hasPendingRewinds)
        let accepted = state.rewindRequested(offset(p1, 3))
        #expect(!accepted)
        // The seek taken before the revocation failed: not tried again for a partition being revoked.
        state.rewindFailed(inFlight[0])
        #expect(!state.hasPendingRewinds)
        _ = state.revokeFinished([p0, p1])
        _ = state.assigned([p0, p1], startingOffsets: [:], startsUnknown: [])
        #expect(!state.hasPendingRewinds)
    }
}
