import Foundation
import Logging
import Messages
import Observability

/// How one reconciler sweep ended: of the App Store's notification history (``NotificationReconciler``) or of a
/// Google Play package's voided purchases (``GooglePlayVoidedSweep``). Both read a window page by page under the
/// ledger's lease and move its checkpoint only once every job is published.
public enum ReconcilerSweepResult: Sendable, Hashable {
    /// Every page read, every job published, the checkpoint moved to `checkpoint`.
    case completed(checkpoint: Date, pages: Int, published: Int)
    /// Another replica holds the lease: nothing done.
    case notLeader
    /// The lease was lost mid-sweep (taken over after an expiry): stopped, checkpoint unmoved.
    case leaseLost
    /// The store, Kafka or the ledger failed within the sweep: stopped, checkpoint unmoved, tried again next interval.
    case failed(String)
}

extension ReconcilerSweepResult {
    /// A sweep of `window` completed: logged (`message`, with the window, the pages and the jobs) and returned.
    static func completed(
        window: (start: Date, end: Date), pages: Int, published: Int, logging message: Logger.Message, to logger: Logger
    ) -> Self {
        logger.info(
            message,
            metadata: [
                LogKeys.reconcileWindowStart: "\(RFC3339.format(window.start))",
                LogKeys.reconcileWindowEnd: "\(RFC3339.format(window.end))",
                LogKeys.reconcilePages: "\(pages)", LogKeys.reconcileRecovered: "\(published)",
            ])
        return .completed(checkpoint: window.end, pages: pages, published: published)
    }
}
