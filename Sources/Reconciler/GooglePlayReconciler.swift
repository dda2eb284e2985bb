import Foundation
import Ledger
import Logging
import Observability
import RateLimiter

/// The Google Play half of `verify-worker reconcile`: every interval, each Play app's voided-purchases sweep, then one
/// pass of re-reads of the Play subscriptions the ledger is unsure of; all of it within one quota share.
public final class GooglePlayReconciler<Clock: GateClock>: Sendable where Clock.Instant: Sendable {
    public let sweeps: [GooglePlayVoidedSweep<Clock>]
    public let rereads: GooglePlayRereads<Clock>?
    let store: any ReconcilerStateStore
    let interval: Duration
    let clock: Clock
    let logger: Logger

    public init(
        sweeps: [GooglePlayVoidedSweep<Clock>], rereads: GooglePlayRereads<Clock>?, store: any ReconcilerStateStore,
        interval: Duration, clock: Clock, logger: Logger
    ) {
        self.sweeps = sweeps
        self.rereads = rereads
        self.store = store
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    /// One round: every package's sweep, then the re-reads.
    public func round() async {
        for sweep in sweeps {
            if case .failed(let why) = await sweep.sweep() {
                logger.warning(
                    "reconcile: voided purchases sweep failed; tried again next interval",
                    metadata: [LogKeys.appBundleID: "\(sweep.packageName)", LogKeys.error: "\(why)"])
            }
        }
        if let rereads, case .failed(let why) = await rereads.pass() {
            logger.warning(
                "reconcile: Play re-reads stopped; tried again next interval", metadata: [LogKeys.error: "\(why)"])
        }
    }

    /// A round every interval until cancelled, then the leases given up.
    public func run() async {
        while !Task.isCancelled {
            let started = clock.now
            await round()
            do {
                try await clock.sleep(until: started.advanced(by: interval), tolerance: nil)
            } catch {
                break
            }
        }
        let now = Date(timeIntervalSince1970: Double(clock.unixMillisecondsNow) / 1000)
        for sweep in sweeps {
            try? await store.releaseReconcilerLease(name: sweep.leaseName, holder: sweep.holder, now: now)
        }
        if let rereads {
            try? await store.releaseReconcilerLease(
                name: GooglePlayReconcileSettings.rereadLeaseName, holder: rereads.holder, now: now)
        }
    }
}
