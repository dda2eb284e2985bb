import Benchmarks
import Testing

/// `bench rtdn` in miniature: the Play simulator's pushes POSTed to the gateway's Google Play route (OIDC tokens
/// checked against the simulator's key set) and decided by a worker that reads each purchase again; every
/// notification is accepted and decided once, and the reads are counted.
@Suite("Benchmarks: RTDN burst", .timeLimit(.minutes(3)))
struct RTDNBurstBenchmarkTests {
    @Test("Every Play notification posted is accepted and gets one verdict, each with one purchase read at most")
    func burst() async throws {
        var options = RTDNBurstBenchmark.Options()
        options.notifications = 50
        options.partitions = 4
        options.stallLimit = .seconds(60)
        let result = try await RTDNBurstBenchmark.run(options) { _ in }
        #expect(result.notifications == 50)
        #expect(result.purchases == 6)
        #expect(result.httpStatuses == ["200": 50])
        #expect(result.undecided == 0)
        #expect(result.duplicated == 0)
        #expect(result.outcomes.values.reduce(0, +) == 50)
        #expect(result.outcomes.keys.allSatisfy { !$0.hasPrefix("unverifiable") }, "\(result.outcomes)")
        #expect(result.types["SUBSCRIPTION_RENEWED", default: 0] > 0)
        let reads = try #require(result.developerAPIReads)
        let readsPerNotification = try #require(result.readsPerNotification)
        #expect(reads > 0 && readsPerNotification <= 1, "\(reads)")
        #expect(result.decidedPerSecondPerWorker > 0)
    }
}
