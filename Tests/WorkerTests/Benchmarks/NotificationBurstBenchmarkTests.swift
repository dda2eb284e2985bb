import Benchmarks
import Testing

/// `bench notifications` in miniature: its parts (the simulator, the verdict reader, the gateway) run as the services
/// of one group and the workers as `verify-worker run`'s runtimes; every notification posted is decided once, in the
/// burst and in the drain, and the group stops when the run returns.
@Suite("Benchmarks: notification burst", .timeLimit(.minutes(3)))
struct NotificationBurstBenchmarkTests {
    @Test(
        "Every notification posted gets one verdict, with workers running and with workers started after",
        arguments: [false, true])
    func burst(drain: Bool) async throws {
        var options = NotificationBurstBenchmark.Options()
        options.notifications = 60
        options.partitions = 4
        options.drain = drain
        options.stallLimit = .seconds(60)
        let result = try await NotificationBurstBenchmark.run(options) { _ in }
        #expect(result.notifications == 60)
        #expect(result.httpStatuses == ["200": 60])
        #expect(result.undecided == 0)
        #expect(result.outcomes.values.reduce(0, +) == 60)
        #expect((result.drainedPerSecond != nil) == drain)
    }
}
