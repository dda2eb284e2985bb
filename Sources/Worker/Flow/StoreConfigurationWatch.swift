import Logging
import Metrics
import Observability
import Synchronization

/// A store's answer that blames this worker's configuration, not the purchase: verifyReceipt's 21004 (the shared
/// secret does not match the app's), the App Store Server API's 401 in both environments (the key, its id or its
/// issuer is wrong), and Google's refusal of a Play app's service account (the token endpoint's `invalid_grant` or
/// 401, the Developer API's 401 after a fresh token, or 403: the account may not act for the app). Recording a
/// verdict on such an answer would make a paid purchase `unverifiable` or `rejected` for good; the job is kept
/// undecided instead (see ``StoreConfigurationWatch``).
public enum StoreConfigurationFault: String, Sendable, Hashable, CaseIterable {
    case sharedSecret = "shared_secret"
    case serverAPIKey = "server_api_key"
    case googlePlayServiceAccount = "google_play_service_account"

    /// The setting an operator must correct (named in the log line; its value never is).
    public var setting: String {
        switch self {
        case .sharedSecret: "VERIFY_SHARED_SECRET (or VERIFY_SHARED_SECRET_FILE)"
        case .serverAPIKey:
            "VERIFY_SERVER_API_KEY (or VERIFY_SERVER_API_KEY_FILE), VERIFY_SERVER_API_KEY_ID, VERIFY_SERVER_API_ISSUER_ID"
        case .googlePlayServiceAccount:
            "the catalog's play_apps[].service_account_key_file (and the account's access to the app in the Play Console)"
        }
    }

    /// The `/readyz` reason while the fault stands.
    public var readinessReason: String {
        switch self {
        case .sharedSecret: "apple_shared_secret_rejected"
        case .serverAPIKey: "apple_server_api_key_rejected"
        case .googlePlayServiceAccount: "google_play_service_account_rejected"
        }
    }

    /// The store whose answer raised the fault, as log lines name it.
    var store: String { self == .googlePlayServiceAccount ? "google play" : "apple" }

    var problem: String {
        switch self {
        case .sharedSecret: "verifyReceipt refused the shared secret (status 21004)"
        case .serverAPIKey: "the App Store Server API refused the key (HTTP 401 in production and sandbox)"
        case .googlePlayServiceAccount: "Google refused a Play app's service account"
        }
    }
}

/// Holds back the jobs whose Apple call failed on a ``StoreConfigurationFault``, so that none is decided on the
/// worker's own mistake: the jobs stay in flight and uncommitted (a worker restarted with the right setting reads
/// them again and decides them), the worker reports not ready with the fault's reason, counts each refused call
/// (`verify_apple_configuration_faults_total{setting}`) and logs one error when the fault appears.
///
/// While a fault stands, jobs that need that setting do not call Apple; one of them probes every `probeInterval`
/// (a secret rotated in place, an Apple-side fix). The first call Apple accepts clears the fault and releases them.
public final class StoreConfigurationWatch: Sendable {
    private struct State {
        /// The faults standing now, with when the next probe may go.
        var standing: [StoreConfigurationFault: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())
    /// Mirrors `state.standing.isEmpty`, so the common path (no fault) takes no lock.
    private let anyStanding = Atomic<Bool>(false)
    private let health: WorkerHealth
    private let logger: Logger
    let probeInterval: Duration
    /// How often a held job looks again whether its fault cleared or its turn to probe came.
    let pollInterval: Duration

    public init(
        health: WorkerHealth, logger: Logger, probeInterval: Duration = .seconds(30),
        pollInterval: Duration = .milliseconds(250)
    ) {
        self.health = health
        self.logger = logger
        self.probeInterval = probeInterval
        self.pollInterval = pollInterval
    }

    /// Whether `fault` stands now.
    public func isStanding(_ fault: StoreConfigurationFault) -> Bool {
        anyStanding.load(ordering: .relaxed) && state.withLock { $0.standing[fault] != nil }
    }

    /// Apple refused a call because of `fault`.
    public func refused(_ fault: StoreConfigurationFault) {
        Counter(label: MetricNames.appleConfigurationFaults, dimensions: [("setting", fault.rawValue)]).increment()
        let appeared = state.withLock { state in
            let appeared = state.standing[fault] == nil
            state.standing[fault] = ContinuousClock.now.advanced(by: probeInterval)
            return appeared
        }
        anyStanding.store(true, ordering: .relaxed)
        guard appeared else { return }
        health.appleConfigurationFailed(fault.readinessReason)
        logger.error(
            "\(fault.store): \(fault.problem); jobs that need it stay undecided and uncommitted until a worker runs with the right setting",
            metadata: [LogKeys.setting: "\(fault.setting)"])
    }

    /// Apple accepted a call that needs `fault`'s setting: the fault, if it stood, is over.
    public func accepted(_ fault: StoreConfigurationFault) {
        guard anyStanding.load(ordering: .relaxed) else { return }
        let cleared = state.withLock { state in
            let cleared = state.standing.removeValue(forKey: fault) != nil
            anyStanding.store(!state.standing.isEmpty, ordering: .relaxed)
            return cleared
        }
        guard cleared else { return }
        health.appleConfigurationRecovered(fault.readinessReason)
        logger.notice("\(fault.store): the setting is accepted again", metadata: [LogKeys.setting: "\(fault.setting)"])
    }

    /// Returns once a job that needs `fault`'s setting may call Apple: at once when the fault does not stand, else
    /// when it clears or this job's turn to probe comes. Throws `CancellationError` when the task is cancelled or
    /// the worker drains (the job stays uncommitted).
    public func waitForTurn(_ fault: StoreConfigurationFault) async throws {
        while true {
            let now = ContinuousClock.now
            let mayCall = state.withLock { state -> Bool in
                guard let probeAt = state.standing[fault] else { return true }
                guard now >= probeAt else { return false }
                state.standing[fault] = now.advanced(by: probeInterval)
                return true
            }
            if mayCall { return }
            if health.isDraining { throw CancellationError() }
            try await Task.sleep(for: pollInterval)
        }
    }
}
