import Logging
import Observability
import Operations
import ServiceLifecycle

/// The Kafka consumer loop (``WorkerLoop``): joins its group once the ledger's schema is migrated, and drains
/// (finishes the jobs in hand, commits) when asked to stop. Last in the group, so it is the first to stop.
struct WorkerService: Service {
    let makeWorker: @Sendable () throws -> WorkerLoop
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
