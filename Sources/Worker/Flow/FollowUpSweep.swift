import Foundation
import Ledger
import Logging
import Observability

/// What both stores' follow-ups (``AppleFollowUps``, ``GooglePlayFollowUps``) do alike: make the queued calls a
/// bounded number at a time while a sweep wakes every interval, and claim the due calls in the ledger, kind by kind.
enum FollowUpSweep {
    /// Makes `queue`'s calls, at most `maximumConcurrent` at once (`taken` as each leaves the queue), while `sweep` runs
    /// every `interval`; returns when the queue ends and the calls under way end.
    static func run<Call: Sendable>(
        _ queue: AsyncStream<Call>, maximumConcurrent: Int, sweepEvery interval: Duration,
        sweep: @escaping @Sendable () async -> Void, taken: (Call) -> Void,
        make: @escaping @Sendable (Call) async -> Void
    ) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    do {
                        try await Task.sleep(for: interval)
                    } catch {
                        return
                    }
                    await sweep()
                }
            }
            await withTaskGroup(of: Void.self) { calls in
                var running = 0
                for await call in queue {
                    taken(call)
                    if running >= max(1, maximumConcurrent) {
                        await calls.next()
                        running -= 1
                    }
                    calls.addTask { await make(call) }
                    running += 1
                }
            }
            group.cancelAll()
        }
    }

    /// Claims the due calls of each of `kinds` in turn (put back, or left by a holder whose lease passed; up to 100 a
    /// kind) for `holder` until `lease` from then, and hands each to `make` with the instant its claim ends, one after
    /// another. Stops early when the task is cancelled, or when the ledger does not answer (logged at debug as
    /// `"<storeName>: follow-up sweep failed (ledger)"`).
    static func sweep(
        _ kinds: [FollowUpRecord.Kind], from store: any FollowUpRecordStore, holder: String, lease: Duration,
        now: () -> Date, storeName: String, logger: Logger,
        make: (FollowUpRecord.Call, ContinuousClock.Instant) async -> Void
    ) async {
        for kind in kinds {
            let due: [FollowUpRecord.Call]
            let claimEnds = ContinuousClock.now.advanced(by: lease)
            do {
                due = try await store.claimDueFollowUps(
                    kind: kind, holder: holder, now: now(), lease: lease, limit: 100)
            } catch {
                logger.debug("\(storeName): follow-up sweep failed (ledger)", metadata: [LogKeys.error: "\(error)"])
                return
            }
            for call in due {
                guard !Task.isCancelled else { return }
                await make(call, claimEnds)
            }
        }
    }
}
