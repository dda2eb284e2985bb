import Benchmarks
import Testing

@Suite("RateLimiter storm simulation")
struct RateLimiterStormSimulationTests {
    @Test("a 21005 storm: calls drop to a quarter within 2 s, recover within 10 s, no job is lost")
    func stormTargets() {
        let report = StormSimulation().run()
        #expect(report.preStormCallsPerSecond > 19)
        #expect(report.stormToPreStormRatio <= 0.25)
        #expect((report.secondsUntilQuarterRate ?? .infinity) <= 2)
        #expect((report.recoverySeconds ?? .infinity) < 10)
        #expect(report.lost == 0)
        #expect(
            report.succeeded + report.unverifiableAfterDeadline + report.unverifiableAttemptsExhausted == report.jobs)
    }

    @Test("the simulation is deterministic for a seed")
    func deterministic() {
        var parameters = StormSimulation.Parameters()
        parameters.stormDuration = .seconds(5)
        parameters.arrivalsAfterStorm = .seconds(5)
        #expect(StormSimulation(parameters: parameters).run() == StormSimulation(parameters: parameters).run())
    }
}
