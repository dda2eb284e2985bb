import Kafka
import Ledger
import Logging
import Observability
import Operations
import RateLimiter
import ServiceLifecycle

// The long-running parts of `verify-worker run`, each a swift-service-lifecycle `Service`. `WorkerRuntime` builds
// them and runs them in one `ServiceGroup`, listed so that the group's reverse-order shutdown is the worker's:
// the pipeline drains and commits first, the producer flushes and closes last.

/// The producer of verdicts, dead letters and throttle signals. Started first, so stopped last: it flushes what the
/// drained pipeline handed it (10 s), then closes (5 s).
struct ProducerService: Service {
    let producer: KafkaProducer
    /// Topics whose partitions are looked up at start: a fresh producer would otherwise hold the first verdicts until
    /// librdkafka's next metadata refresh (about a second; `bench pipeline` (b)).
    let outputTopics: [String]
    /// The lookup starts once the operations port listens (see ``BackgroundService/after``).
    let after: OneShot<Bool>
    let logger: Logger

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                guard await after.wait() == true else { return }
                do {
                    try await producer.prepare(topics: outputTopics, timeout: .seconds(5))
                } catch {
                    logger.notice(
                        "kafka: output topics' partitions not looked up at start; the first outputs may wait",
                        metadata: [LogKeys.error: "\(error)"])
                }
            }
            // Cancelled (the group failed) or asked to stop: the outputs in hand are flushed either way.
            try? await gracefulShutdown()
            group.cancelAll()
        }
        do {
            try await producer.flush(timeout: .seconds(10))
        } catch {
            logger.warning("kafka: flush at shutdown failed", metadata: [LogKeys.error: "\(error)"])
        }
        await producer.shutdown(timeout: .seconds(5))
    }
}

/// `/healthz`, `/readyz` and `/metrics`. A port that cannot be bound fails the group at start with a
/// ``ConfigurationError`` (exit 2), before the worker says it started.
struct OperationsService: Service {
    let server: OperationsServer
    let host: String
    let port: Int
    /// Resolved true once the port listens.
    let listening: OneShot<Bool>

    func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await server.run()
                } catch {
                    // A port never bound is reported once, as the configuration error below.
                    if await server.waitUntilListening() != nil { throw error }
                }
            }
            guard await server.waitUntilListening() != nil else {
                group.cancelAll()
                throw ConfigurationError(key: "metrics_port", problem: "cannot listen on \(host):\(port) (in use?)")
            }
            listening.resolve(true)
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }
}

/// A part that runs until it is cancelled: on graceful shutdown it is cancelled, and its cancellation is its end.
/// Work that ends on its own earlier is not a reason to stop the worker (as before the parts were services): the
/// service then waits for its turn to stop, since the group takes a service that ends out of turn for a failure.
struct BackgroundService: Service {
    let name: String
    let work: @Sendable () async throws -> Void
    /// Run once the service stops (the call gate's shutdown, the HTTP engine's).
    var cleanUp: @Sendable () -> Void = {}
    /// Started only once this is resolved true (the operations port listens): a worker refused at start says one
    /// line, the configuration error, and nothing else.
    var after: OneShot<Bool>? = nil

    func run() async throws {
        defer { cleanUp() }
        do {
            try await cancelWhenGracefulShutdown {
                if let after, await after.wait() != true { return }
                try await work()
            }
        } catch is CancellationError {
        }
        try? await gracefulShutdown()
    }
}

/// The Kafka consumer loop (``PipelineWorker``): joins its group once the ledger's schema is migrated, and drains
/// (finishes the jobs in hand, commits) when asked to stop. Last in the group, so it is the first to stop.
struct PipelineService: Service {
    let makeWorker: @Sendable () throws -> PipelineWorker
    /// Set once the operations port listens (at once without one): the worker then says it started.
    let listening: OneShot<Bool>
    let migrated: OneShot<Void>
    let fatal: OneShot<String>
    let started: @Sendable () -> Void
    let drainTimeout: Duration
    let logger: Logger

    /// A fault the worker cannot work around; thrown after the drain, so the group shuts the rest down in order and
    /// the command exits 1.
    struct Fault: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    private enum Stop {
        case asked
        case fatal(String)
        case consumerEnded
    }

    func run() async throws {
        guard await cancelWhenGracefulShutdown({ await listening.wait() }) == true else { return }
        started()
        // Jobs wait for the schema: deciding against a ledger without tables only fails and backs off. A worker whose
        // ledger is unreachable takes no partition from healthy workers.
        guard await cancelWhenGracefulShutdown({ await migrated.wait() }) != nil, !Task.isShuttingDownGracefully
        else {
            logStop("stopped before the ledger answered")
            return
        }
        let worker = try makeWorker()
        let stop = await withTaskGroup(of: Stop?.self) { group -> Stop in
            group.addTask {
                _ = try? await worker.run()
                return .consumerEnded
            }
            group.addTask { await fatal.wait().map { .fatal($0) } }
            group.addTask {
                do {
                    try await gracefulShutdown()
                    return .asked
                } catch {
                    return nil
                }
            }
            // The first of: a stop request, a fatal fault, or the worker ending on its own (consumer failure).
            var first: Stop?
            while first == nil, let next = await group.next() { first = next }
            let stop = first ?? .asked
            logStop(
                {
                    switch stop {
                    case .asked: "asked to stop"
                    case .fatal(let reason): "fatal(\"\(reason)\")"
                    case .consumerEnded: "consumer ended"
                    }
                }())
            await worker.drain(timeout: drainTimeout)
            group.cancelAll()
            return stop
        }
        switch stop {
        case .asked: return
        case .fatal(let reason): throw Fault(reason: reason)
        case .consumerEnded: throw Fault(reason: "the consumer stopped")
        }
    }

    private func logStop(_ reason: String) {
        logger.notice(
            "worker: draining",
            metadata: [LogKeys.drainTimeout: "\(drainTimeout)", LogKeys.stopReason: "\(reason)"])
    }
}
