import CodedErrors
import Decision
import Foundation
import Ledger
import Logging
import Metrics
import Observability
import Synchronization

/// How jobs that carry the same proof share one Apple answer (docs/RATE-LIMITING.md, "One Apple call per receipt").
public struct AppleCoalescingConfiguration: Sendable {
    /// Whether concurrent jobs with the same proof wait for one Apple answer (within the worker, and across workers
    /// through the ledger's verification lease). Off, every job asks Apple itself. Default: true.
    public var enabled: Bool
    /// How long a worker's verification lease lasts, and how long Apple's answer stays in the ledger for the other
    /// workers; zero shares answers within the worker only. Default: 10 s.
    public var leaseDuration: Duration
    /// This worker's name in the lease table: unique per process (a restarted worker must not take its old self's
    /// leases for its own). Default: `worker-` and 12 random hex digits.
    public var holder: String
    /// The first wait before looking at another worker's lease again; it doubles up to ``pollMaximum``. Default: 20 ms.
    public var pollInitial: Duration
    /// Default: 250 ms.
    public var pollMaximum: Duration
    /// The wall clock lease expiries are written in (they are compared across workers). Default: `Date.init`.
    public var wallClock: @Sendable () -> Date

    public init(
        enabled: Bool = true, leaseDuration: Duration = .seconds(10), holder: String? = nil,
        pollInitial: Duration = .milliseconds(20), pollMaximum: Duration = .milliseconds(250),
        wallClock: @escaping @Sendable () -> Date = Date.init
    ) {
        self.enabled = enabled
        self.leaseDuration = leaseDuration
        self.holder = holder ?? Self.uniqueHolder(prefix: "worker")
        self.pollInitial = pollInitial
        self.pollMaximum = pollMaximum
        self.wallClock = wallClock
    }

    /// `prefix-` and 12 random hex digits.
    public static func uniqueHolder(prefix: String) -> String {
        prefix + "-" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12))
    }
}

/// Lets concurrent jobs with the same proof (the same normalized receipt, or the same transaction id) share one
/// Apple answer: within the worker through an ``AppleSingleFlight``, across workers through the ledger's
/// verification lease (``VerificationLeaseStore``). What is shared is Apple's *evidence*, never a verdict: each job
/// is still settled in the ledger with its own account, so the first grant wins and the others become `replayed`
/// or `already_owned` through the usual rules.
///
/// The lease only ever saves calls: when the ledger fails, a job asks Apple itself; no job waits for another
/// worker's lease past its own deadline, nor longer than two lease lengths whatever the row says (clock skew).
final class AppleCallCoalescer: Sendable {
    let configuration: AppleCoalescingConfiguration
    private let leases: (any VerificationLeaseStore)?
    private let flights = AppleSingleFlight<String, PurchaseEvidence>()
    private let logger: Logger
    /// When this worker last swept expired leases (at most once a minute, by a job that just recorded an answer).
    private let lastSweep = Mutex<ContinuousClock.Instant?>(nil)
    private let sweepInterval: Duration = .seconds(60)
    /// Jobs that took another job's Apple answer, by where it came from (`worker`, `lease`).
    private let coalesced = MetricCache<String, Counter> {
        Counter(label: MetricNames.appleCallsCoalesced, dimensions: [("via", $0)])
    }

    init(configuration: AppleCoalescingConfiguration, leases: (any VerificationLeaseStore)?, logger: Logger) {
        self.configuration = configuration
        self.leases = configuration.leaseDuration > .zero ? leases : nil
        self.logger = logger
    }

    /// Flights in this worker now (tests).
    var flightCount: Int { flights.flightCount }

    /// Jobs of this worker waiting for another's answer now (tests).
    var followerCount: Int { flights.followerCount }

    /// Apple's evidence for the proof `key` names: from `ask` (this job calls), from another job of the worker, or
    /// from another worker's answer in the ledger. `unavailable` is what the job gets when its deadline comes while
    /// it waits. Throws `CancellationError` (and whatever `ask` throws).
    func evidence(
        key: String?, deadline: ContinuousClock.Instant, unavailable: PurchaseEvidence,
        _ ask: () async throws -> PurchaseEvidence
    ) async throws -> PurchaseEvidence {
        guard configuration.enabled, let key else { return try await ask() }
        switch try await flights.run(key, deadline: deadline, { try await lead(key, deadline, unavailable, ask) }) {
        case .own(let evidence):
            return evidence
        case .shared(let evidence):
            coalesced["worker"].increment()
            return evidence
        case .deadlinePassed:
            return unavailable
        }
    }

    /// The worker's leader: takes the cluster's lease and asks Apple, or waits for the holder's answer.
    private func lead(
        _ key: String, _ deadline: ContinuousClock.Instant, _ unavailable: PurchaseEvidence,
        _ ask: () async throws -> PurchaseEvidence
    ) async throws -> PurchaseEvidence {
        guard let leases else { return try await ask() }
        let clock = ContinuousClock()
        var pause = configuration.pollInitial
        var waitLimit: ContinuousClock.Instant?
        while true {
            let state: VerificationLeaseState
            do {
                state = try await leases.acquireVerificationLease(
                    key: key, holder: configuration.holder, now: configuration.wallClock(),
                    duration: configuration.leaseDuration)
            } catch let error as LedgerError {
                leaseFailed(error, "acquire")
                return try await ask()
            }
            switch state {
            case .answered(let evidence):
                coalesced["lease"].increment()
                return evidence
            case .acquired:
                return try await askHolding(key, leases, ask)
            case .held(_, let until):
                let now = clock.now
                // Two lease lengths from the first sight of a holder: past that the row is wrong (a holder's clock
                // far ahead), and waiting longer would only delay the job.
                let limit = waitLimit ?? now.advanced(by: configuration.leaseDuration * 2)
                waitLimit = limit
                if now >= deadline { return unavailable }
                if now >= limit { return try await ask() }
                let untilExpiry = Duration.milliseconds(
                    max(1, Int64((until.timeIntervalSince(configuration.wallClock()) * 1000).rounded(.up))))
                let wait = min(pause, untilExpiry, now.duration(to: deadline), now.duration(to: limit))
                // Another worker is asking Apple: this job leaves its stage slot while it waits for that answer.
                try await JobStageSlot.whileWaitingElsewhere { try await Task.sleep(for: wait) }
                pause = min(pause * 2, configuration.pollMaximum)
            }
        }
    }

    /// Asks Apple while holding the lease, then leaves the answer for the others, or releases the lease when Apple
    /// could not answer (the others then ask themselves, at once).
    private func askHolding(
        _ key: String, _ leases: any VerificationLeaseStore, _ ask: () async throws -> PurchaseEvidence
    ) async throws -> PurchaseEvidence {
        let holder = configuration.holder
        let evidence: PurchaseEvidence
        do {
            evidence = try await ask()
        } catch {
            // Cancelled: best effort (a cancelled task's ledger call may refuse); the lease expires anyway.
            try? await leases.releaseVerificationLease(key: key, holder: holder)
            throw error
        }
        do {
            if evidence.appleUnavailable {
                try await leases.releaseVerificationLease(key: key, holder: holder)
            } else {
                try await leases.recordVerificationAnswer(
                    key: key, holder: holder, evidence: evidence, now: configuration.wallClock(),
                    keepFor: configuration.leaseDuration)
            }
        } catch {
            leaseFailed(error, "record")
        }
        await sweepIfDue(leases)
        return evidence
    }

    private func sweepIfDue(_ leases: any VerificationLeaseStore) async {
        let now = ContinuousClock.now
        let due = lastSweep.withLock { last in
            guard last.map({ $0.duration(to: now) >= sweepInterval }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        do {
            _ = try await leases.removeExpiredVerificationLeases(before: configuration.wallClock())
        } catch {
            leaseFailed(error, "sweep")
        }
    }

    @inline(never)
    private func leaseFailed(_ error: any Error, _ operation: String) {
        logger.debug(
            "apple: verification lease \(operation) failed; the job asks Apple itself",
            metadata: [LogKeys.error: "\(error)"])
    }
}

extension AppStore {
    /// The key jobs share an Apple answer under: the normalized receipt's digest (``AppleBoundReceipt``), or the
    /// transaction id; nil when Apple is not asked.
    @inline(never)
    func coalescingKey(_ request: AppleRequest) -> String? {
        switch request {
        case .none:
            return nil
        case .verifyReceipt(let receipt, _):
            return receipt.coalescingKey
        case .transactionInfo(_, let transactionID):
            return "transaction:" + transactionID
        }
    }
}
