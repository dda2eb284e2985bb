import AppleSimulator
import Benchmarks
import Demo
import Foundation
import Messages
import Testing
import Traffic
import Worker

/// `bench pipeline` runs its workers as `verify-worker run` children and reads their metrics, memory and CPU.
@Suite("Pipeline: bench with worker processes")
struct PipelineBenchProcessTests {
    @Test("ProcessCPUTime reads utime + stime after the command name, which may hold spaces and parentheses")
    func cpuTimeParse() {
        let stat = "4242 (verify (x) worker) S 1 2 3 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 9 0 2220892 3133440 390"
        #expect(ProcessCPUTime.parse(stat: stat) == ProcessCPUTime(seconds: 3))
        #expect(ProcessCPUTime.parse(stat: "garbage") == nil)
        #expect(ProcessCPUTime.current().map { $0.seconds >= 0 } ?? true)
    }

    @Test(
        "a demo with its worker as a child process decides every job once, and the child's metrics are sampled",
        .timeLimit(.minutes(2)))
    func workerChild() async throws {
        var options = DemoOptions()
        options.jobs = 60
        options.workers = 1
        options.partitions = 4
        options.mix = TrafficMix(shares: [.otherApp: 0.5, .genuine: 0.5])
        options.progressInterval = nil
        options.workerExecutable = try TestEnvironment.verifyWorkerBinary()
        let sampler = WorkerProcessSampler()
        let report = try await DemoRun(options: options).run(watch: sampler.watch)

        #expect(report.entries.count == 60)
        for entry in report.entries {
            #expect(entry.verdicts.count == 1, "job \(entry.generated.job.jobID) got \(entry.verdicts.count) verdicts")
        }
        let uses = sampler.appleUse(concurrency: 4, latencyMs: 100)
        #expect(uses.count == 1)
        #expect(uses.first?.use.appleCalls == report.appleCalls)
        #expect(sampler.memoryPeaks(worker: 0).resident > 0)
        #expect(sampler.cpuSeconds().count == 1)
        // SIGTERM with the metrics sampler still polling: the child drains, closes and exits 0 (no crash on the way).
        #expect(report.workerExits == [0])
    }
}
