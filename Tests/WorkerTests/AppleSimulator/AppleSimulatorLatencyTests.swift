import AppleSimulator
import Foundation
import Testing

@Suite("Apple simulator: added latency", .timeLimit(.minutes(2)))
struct AppleSimulatorLatencyTests {
    @Test("latency_ms holds each Apple answer at least that long, from the event loop's timers")
    func latencyIsApplied() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Production")
            let receipt = try #require(minted["receipt"] as? String)
            _ = try await sim.verify(receipt, sandbox: false)  // fills the answer cache
            #expect(try await sim.post("sim/faults", ["latency_ms": 300]).status == 200)
            let clock = ContinuousClock()
            let started = clock.now
            let answers = try await withThrowingTaskGroup(of: Int?.self) { group in
                for _ in 0..<4 {
                    group.addTask { try await sim.verify(receipt, sandbox: false)["status"] as? Int }
                }
                return try await group.reduce(into: [Int?]()) { $0.append($1) }
            }
            #expect(answers == [0, 0, 0, 0])
            #expect(started.duration(to: clock.now) >= .milliseconds(300))
            #expect(try await sim.post("sim/faults", [:]).status == 200)
        }
    }
}
