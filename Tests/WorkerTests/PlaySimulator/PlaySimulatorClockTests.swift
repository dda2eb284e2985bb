import Foundation
import PlaySimulator
import Synchronization
import Testing

@Suite("Play simulator: clock")
struct PlaySimulatorClockTests {
    @Test("the clock runs `scale` times faster than its base, jumps forward on advance, and never runs back")
    func compressedClock() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let base = Mutex(start)
        let clock = PlaySimulatorClock(scale: 86_400, base: { base.withLock { $0 } })
        #expect(clock.now() == start)
        // Three real seconds are Google's three days.
        base.withLock { $0 = start.addingTimeInterval(3) }
        #expect(clock.now() == start.addingTimeInterval(3 * 86_400))
        clock.advance(by: 60)
        #expect(clock.now() == start.addingTimeInterval(3 * 86_400 + 60))
        clock.advance(by: -3600)
        clock.advance(by: .nan)
        #expect(clock.now() == start.addingTimeInterval(3 * 86_400 + 60))

        let manual = PlaySimulatorClock.manual(start: start)
        manual.advance(by: 5)
        #expect(manual.now() == start.addingTimeInterval(5))
    }
}
