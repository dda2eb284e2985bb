import ArgumentParser
import Foundation
import Traffic

/// `verify-worker bench pipeline`: the worker's throughput, latency and memory next to the raw Kafka ceiling.
package struct BenchPipelineArguments: HarnessArguments {
    package static let commandConfiguration = CommandConfiguration(
        commandName: "pipeline",
        abstract: "Measures the whole pipeline in one process and prints JSON.",
        discussion: """
            In one run, each part on a fresh mock cluster, Apple simulator and SQLite ledger in this process, the \
            workers as `verify-worker run` children of the same executable (--workers-in-process: in this \
            process): (e) resident memory of one worker with --memory-jobs jobs in flight; (a) the raw Kafka ceiling (bench kafka's produce and \
            consume-and-commit, with messages the size of a job); (b) throughput on locally decided traffic \
            (other-app and cracker receipts); (c) throughput on the seed-000 mix with Apple at --apple-latency-ms \
            and --apple-concurrency calls per worker, next to the bound workers x concurrency / latency; (d) p50/p99 \
            submit-to-verdict latency of (b) and (c) (one burst each: mostly queueing) and of a run of the seed mix \
            submitted at half the throughput of (c). (b) also drains its jobs from a topic filled before the workers \
            start (--no-local-drain skips it). Progress goes to stderr. Figures: docs/BENCHMARKS.md.
            """
    )

    @Option(help: "Messages of the raw Kafka run.")
    package var kafkaMessages = 50_000

    @Option(help: "Jobs of the locally decided run.")
    package var localJobs = 20_000

    @Option(help: "Jobs of the seed-mix run.")
    package var mixJobs = 20_000

    @Option(help: "Simulated Apple latency of the seed-mix run, in milliseconds.")
    package var appleLatencyMs = 100

    @Option(help: "Concurrent Apple calls per worker in the seed-mix run (floor and ceiling of the gate).")
    package var appleConcurrency = 2

    @Option(help: "Jobs of the paced latency run (submitted at half the seed-mix throughput).")
    package var latencyJobs = 3_000

    @Option(help: "Jobs held in flight at once in the memory run (0 skips it).")
    package var memoryJobs = 10_000

    @Option(help: "Workers (consumers of one group, in this process).")
    package var workers = 2

    @Option(help: "Partitions of every topic (the mock cluster keeps about 5 MB per partition).")
    package var partitions = 32

    @Option(help: "The workers' librdkafka properties (name=value;...), for tuning experiments.")
    package var workerKafkaProperties = ""

    @Flag(help: "Run the workers inside the bench process instead of as `verify-worker run` children.")
    package var workersInProcess = false

    @Flag(
        inversion: .prefixedNo,
        help: "After (b)'s burst, drain its jobs from a topic filled before the workers start (consumer throughput).")
    package var localDrain = true

    @Option(help: "The parts to run, comma-separated letters: a (raw Kafka), b, c, d, e.")
    package var parts = "a,b,c,d,e"

    private var selectedParts: Set<PipelineBenchmarkPart> {
        Set(
            parts.split(separator: ",").compactMap {
                PipelineBenchmarkPart(rawValue: $0.trimmingCharacters(in: .whitespaces))
            })
    }

    package init() {}

    package func validate() throws {
        guard kafkaMessages > 0, localJobs > 0, mixJobs > 0, latencyJobs > 0, memoryJobs >= 0 else {
            throw ValidationError("message and job counts must be positive")
        }
        guard appleLatencyMs > 0, appleConcurrency > 0, workers > 0, partitions > 0 else {
            throw ValidationError("latency, concurrency, workers and partitions must be positive")
        }
        let names = parts.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard !names.isEmpty, names.allSatisfy({ PipelineBenchmarkPart(rawValue: $0) != nil }) else {
            throw ValidationError("--parts takes letters from a, b, c, d, e separated by commas")
        }
    }

    package func run() async throws {
        let options = PipelineBenchmarkOptions(
            kafkaMessages: kafkaMessages, localJobs: localJobs, mixJobs: mixJobs, appleLatencyMs: appleLatencyMs,
            appleConcurrency: appleConcurrency, latencyJobs: latencyJobs, memoryJobs: memoryJobs, workers: workers,
            partitions: partitions, workerKafkaProperties: workerKafkaProperties, workersInProcess: workersInProcess,
            localDrain: localDrain, parts: selectedParts)
        let result = try await PipelineBenchmark(options: options) { line in
            FileHandle.standardError.write(Data("bench pipeline: \(line)\n".utf8))
        }.run()
        try printJSON(result, snakeCaseKeys: true)
    }
}
