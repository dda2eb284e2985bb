import ArgumentParser
import Foundation
import RateLimiter
import Traffic

/// `verify-worker bench ratelimiter`: the cost of the Apple call gate, and a simulated 21005 storm.
package struct BenchRateLimiterArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "ratelimiter",
        abstract: "Measures AppleCallGate acquire/report cost and simulates a 21005 storm on a manual clock."
    )

    @Option(help: "Acquire/report pairs for the uncontended measurement.")
    package var iterations = 200_000

    @Option(help: "Concurrent tasks for the contended measurement.")
    package var tasks = 1_000

    @Option(help: "Acquire/report pairs per task in the contended measurement.")
    package var perTask = 100

    @Option(help: "Concurrency limit during the contended measurement (callers beyond it wait in the queue).")
    package var contendedLimit = 16

    @Option(help: "Seed for the storm simulation.")
    package var seed: UInt64 = 42

    @Option(help: "Jobs per second in the storm simulation.")
    package var jobsPerSecond = 20.0

    package init() {}

    package func run() async throws {
        let uncontended = try await GateCostBenchmark.uncontended(iterations: iterations)
        let contended = try await GateCostBenchmark.contended(tasks: tasks, perTask: perTask, limit: contendedLimit)
        var parameters = StormSimulation.Parameters()
        parameters.seed = seed
        parameters.jobsPerSecond = jobsPerSecond
        let started = ContinuousClock.now
        let storm = StormSimulation(parameters: parameters).run()
        let stormRealTime = ContinuousClock.now - started
        let output = BenchRateLimiterOutput(
            uncontended: uncontended, contended: contended,
            stormSimulation: .init(
                realTimeMilliseconds: stormRealTime.milliseconds,
                appleLatencyMilliseconds: parameters.appleLatency.milliseconds,
                appleCapacity: parameters.appleCapacity, stormStartSeconds: parameters.stormStart.milliseconds / 1000,
                stormDurationSeconds: parameters.stormDuration.milliseconds / 1000,
                stormFailureRatio: parameters.stormFailureRatio,
                jobDeadlineSeconds: parameters.jobDeadline.milliseconds / 1000, jobsPerSecond: jobsPerSecond,
                seed: seed, report: storm))
        try printJSON(output)
    }
}

/// The JSON `bench ratelimiter` prints.
struct BenchRateLimiterOutput: Codable {
    package var uncontended: GateCostBenchmark.Result
    package var contended: GateCostBenchmark.Result

    struct Storm: Codable {
        var realTimeMilliseconds: Double
        var appleLatencyMilliseconds: Double
        var appleCapacity: Int
        var stormStartSeconds: Double
        var stormDurationSeconds: Double
        var stormFailureRatio: Double
        var jobDeadlineSeconds: Double
        var jobsPerSecond: Double
        var seed: UInt64
        var report: StormSimulation.Report
    }
    package var stormSimulation: Storm
}

extension Duration {
    fileprivate var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}
