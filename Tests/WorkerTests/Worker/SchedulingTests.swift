import Testing
import Worker

@Suite("Pipeline scheduling")
struct SchedulingTests {
    @Test("the committable offset is the lowest unfinished one, whatever the finishing order")
    func lowestUnfinished() {
        var offsets = PartitionOffsets()
        #expect(offsets.committable == nil)
        for o in Int64(10)..<15 { offsets.start(o) }
        #expect(offsets.committable == 10)
        offsets.finish(12)
        offsets.finish(11)
        #expect(offsets.committable == 10)
        offsets.finish(10)
        #expect(offsets.committable == 13)
        offsets.finish(14)
        #expect(offsets.committable == 13)
        offsets.finish(13)
        #expect(offsets.committable == 15)
        #expect(offsets.inFlight == 0)
    }

    @Test("gaps in offsets (compaction, markers) do not hold commits back")
    func gaps() {
        var offsets = PartitionOffsets()
        offsets.start(3)
        offsets.start(7)
        offsets.start(20)
        offsets.finish(3)
        #expect(offsets.committable == 7)
        offsets.finish(20)
        offsets.finish(7)
        #expect(offsets.committable == 21)
    }

    @Test("redelivered, unknown and doubly finished offsets are refused")
    func refusals() {
        var offsets = PartitionOffsets()
        let r1 = offsets.start(5)
        #expect(r1)
        let r2 = offsets.start(5)
        #expect(!r2)
        let r3 = offsets.start(4)
        #expect(!r3)
        let r4 = offsets.finish(6)
        #expect(!r4)
        let r5 = offsets.finish(5)
        #expect(r5)
        let r6 = offsets.finish(5)
        #expect(!r6)
        #expect(offsets.inFlight == 0)
    }

    @Test("a commit is handed out once per position")
    func takeCommit() {
        var offsets = PartitionOffsets()
        offsets.start(0)
        offsets.start(1)
        let r7 = offsets.takeCommit()
        #expect(r7 == 0)
        let r8 = offsets.takeCommit()
        #expect(r8 == nil)
        offsets.finish(1)
        let r9 = offsets.takeCommit()
        #expect(r9 == nil)
        offsets.finish(0)
        let r10 = offsets.takeCommit()
        #expect(r10 == 2)
    }

    @Test("random finishing orders never commit past an unfinished offset")
    func randomOrders() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var offsets = PartitionOffsets()
            var pending = Set<Int64>()
            var next: Int64 = 0
            for _ in 0..<500 {
                if pending.isEmpty || Bool.random(using: &generator) {
                    next += Int64.random(in: 1...3, using: &generator)
                    offsets.start(next)
                    pending.insert(next)
                } else {
                    let done = pending.randomElement(using: &generator)!
                    offsets.finish(done)
                    pending.remove(done)
                }
                let expected = pending.min() ?? (next + 1)
                #expect(offsets.committable == expected)
                #expect(offsets.inFlight == pending.count)
            }
        }
    }

    @Test("jobs of one key run one at a time, in order; other keys are not held back")
    func keyOrder() {
        var queue = KeyOrderedQueue<String, Int>()
        let r11 = queue.enqueue(1, key: "a")
        #expect(r11 == 1)
        let r12 = queue.enqueue(2, key: "a")
        #expect(r12 == nil)
        let r13 = queue.enqueue(3, key: "b")
        #expect(r13 == 3)
        let r14 = queue.enqueue(4, key: "a")
        #expect(r14 == nil)
        #expect(queue.waitingCount == 2)
        let r15 = queue.complete(key: "a")
        #expect(r15 == 2)
        let r16 = queue.complete(key: "b")
        #expect(r16 == nil)
        let r17 = queue.complete(key: "a")
        #expect(r17 == 4)
        let r18 = queue.complete(key: "a")
        #expect(r18 == nil)
        #expect(queue.activeKeys == 0)
        let r19 = queue.enqueue(5, key: "a")
        #expect(r19 == 5)
    }

    @Test("waiting jobs of a revoked partition can be taken out")
    func removeWaiting() {
        var queue = KeyOrderedQueue<String, (partition: Int, id: Int)>()
        _ = queue.enqueue((0, 1), key: "a")
        _ = queue.enqueue((1, 2), key: "a")
        _ = queue.enqueue((0, 3), key: "a")
        let removed = queue.removeWaiting { $0.partition == 1 }
        #expect(removed.map(\.id) == [2])
        let r20 = queue.complete(key: "a")
        #expect(r20?.id == 3)
    }

    @Test("flow control pauses at the high-water mark and resumes at the low-water mark")
    func flowControl() {
        var flow = FlowControl(maximumInFlight: 4, resumeFraction: 0.5)
        let r21 = flow.admitted()
        #expect(r21 == .none)
        let r22 = flow.admitted()
        #expect(r22 == .none)
        let r23 = flow.admitted()
        #expect(r23 == .none)
        let r24 = flow.admitted()
        #expect(r24 == .pause)
        #expect(flow.admitted() == .none)  // messages already fetched still arrive while paused
        let r25 = flow.released()
        #expect(r25 == .none)
        let r26 = flow.released()
        #expect(r26 == .none)
        let r27 = flow.released()
        #expect(r27 == .resume)
        #expect(!flow.isPaused)
        let r28 = flow.released(count: 10)
        #expect(r28 == .none)
        #expect(flow.inFlight == 0)
    }
}
