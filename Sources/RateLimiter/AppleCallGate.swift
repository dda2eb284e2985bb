import CodedErrors
import Foundation
import Synchronization

/// The gate every Apple call passes: a request-rate limit per endpoint, an adaptive concurrency limit, a circuit
/// breaker, `Retry-After` holds and a retry budget, followed cluster-wide through ``ThrottleSignal``s.
///
/// ```swift
/// let permit = try await gate.acquire(.transactionInfo, priority: .firstAttempt, deadline: job.deadline)
/// let outcome = await callApple()          // success / throttled / timeout / failure
/// gate.report(permit, outcome)
/// ```
///
/// Waiting is fair (first come, first served within a priority; every waiting first attempt before any retry) and
/// cancellable (a cancelled task leaves the queue at once with `CancellationError`). While the breaker is open callers
/// wait until a probe or the breaker closes, or until their deadline passes (``AppleCallGateError/Code/deadlineExceeded``),
/// unless ``AppleCallGateConfiguration/whenBreakerOpen`` is `failFast`.
public final class AppleCallGate<C: GateClock>: Sendable where C.Instant: Sendable {
    /// The permit type of this gate.
    public typealias Permit = CallPermit<C.Instant>
    private typealias Continuation = CheckedContinuation<Permit, any Error>
    private typealias StateMachine = AppleCallGateStateMachine<C.Instant, Continuation>

    private let state: Mutex<StateMachine>
    private let clock: C
    private let metrics: any RateLimiterMetrics
    private let publish: (@Sendable (ThrottleSignal) -> Void)?

    /// The configuration in force.
    public let configuration: AppleCallGateConfiguration

    /// A gate reading `clock`, reporting to `metrics`, and handing each throttle signal to publish to `publish`
    /// (the `receipt-control` producer; `nil` for a single worker).
    public init(
        configuration: AppleCallGateConfiguration = AppleCallGateConfiguration(), clock: C,
        metrics: (any RateLimiterMetrics)? = nil, publish: (@Sendable (ThrottleSignal) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.clock = clock
        self.metrics = metrics ?? SwiftMetricsRateLimiterMetrics(gateLabel: configuration.label)
        self.publish = publish
        self.state = Mutex(
            StateMachine(configuration: configuration, now: clock.now, unixMilliseconds: clock.unixMillisecondsNow))
    }

    /// Waits for permission to call `endpoint`.
    ///
    /// - Parameters:
    ///   - priority: ``CallPriority/firstAttempt`` for a job's first call, ``CallPriority/retry`` afterwards.
    ///   - deadline: give up (``AppleCallGateError/Code/deadlineExceeded``) if no permit by then; `nil` waits until
    ///     the task is cancelled.
    /// - Throws: ``AppleCallGateError`` or `CancellationError`.
    public func acquire(
        _ endpoint: StoreEndpoint, priority: CallPriority = .firstAttempt, deadline: C.Instant? = nil
    ) async throws -> Permit {
        let now = clock.now
        let immediate = state.withLock {
            $0.acquireImmediately(endpoint: endpoint, priority: priority, deadline: deadline, now: now)
        }
        switch immediate {
        case .granted(let permit, let actions):
            if priority == .retry { metrics.recordRetry() }
            if let actions { perform(actions) }
            return permit
        case .rejected(let error):
            metrics.recordRejection(error.code)
            throw error
        case .mustWait:
            break
        }
        try Task.checkCancellation()
        let id = state.withLock { $0.reserveWaiterID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Continuation) in
                let actions = state.withLock { machine -> StateMachine.Actions? in
                    // Checked under the lock: a cancellation before this point found no waiter to remove.
                    guard Task.isCancelled == false else { return nil }
                    return machine.enqueue(
                        id: id, endpoint: endpoint, priority: priority, deadline: deadline, payload: continuation,
                        now: clock.now)
                }
                if let actions {
                    perform(actions)
                } else {
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let cancelled = state.withLock { $0.cancel(id: id) }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Reports how the call made with `permit` ended. Call exactly once per permit (later calls are ignored).
    public func report(_ permit: Permit, _ outcome: CallOutcome) {
        let now = clock.now
        let wall = clock.unixMillisecondsNow
        let actions = state.withLock { $0.report(permit, outcome: outcome, now: now, unixMilliseconds: wall) }
        if actions.outcomeAccepted { metrics.recordOutcome(outcome) }
        perform(actions)
    }

    /// Takes in a signal from another worker. Returns whether it was accepted (see ``ClusterThrottle/ingest(_:now:unixMillisecondsNow:)``).
    @discardableResult
    public func ingest(_ signal: ThrottleSignal) -> Bool {
        let now = clock.now
        let wall = clock.unixMillisecondsNow
        let (accepted, actions) = state.withLock { $0.ingest(signal, now: now, unixMilliseconds: wall) }
        perform(actions)
        return accepted
    }

    /// Takes in a `receipt-control` record value. Returns false, without throwing, for anything that is not a valid
    /// signal: a bad record must not stop the control consumer.
    @discardableResult
    public func ingest(signalJSON data: some Collection<UInt8>) -> Bool {
        guard let signal = try? ThrottleSignal(jsonData: .init(data)) else { return false }
        return ingest(signal)
    }

    /// Publishes this worker's signal through `publish` if the publish policy says it is due (a heartbeat or a
    /// change waiting for the minimum interval). Returns the signal published, if any.
    @discardableResult
    public func publishSignalIfDue() -> ThrottleSignal? {
        let now = clock.now
        let wall = clock.unixMillisecondsNow
        let signal = state.withLock { $0.signalToPublish(now: now, unixMilliseconds: wall) }
        if let signal { publish?(signal) }
        return signal
    }

    /// Calls ``publishSignalIfDue()`` every half minimum interval until cancelled: run it as part of the worker's
    /// service group when workers exchange signals.
    public func runSignalPublisher() async throws {
        let period = max(configuration.publishPolicy.minimumInterval / 2, .milliseconds(50))
        while Task.isCancelled == false {
            try await clock.sleep(for: period)
            publishSignalIfDue()
        }
    }

    /// This worker's current signal, whether or not it is due.
    func currentSignal() -> ThrottleSignal {
        let now = clock.now
        let wall = clock.unixMillisecondsNow
        return state.withLock { $0.localSignal(now: now, unixMilliseconds: wall) }
    }

    /// The gate's state now.
    public func snapshot() -> AppleCallGateSnapshot {
        let now = clock.now
        return state.withLock { $0.snapshot(now: now) }
    }

    /// Fails every waiting caller with ``AppleCallGateError/Code/shutDown`` and refuses later ones. Calls in flight
    /// may still report.
    public func shutDown() {
        let actions = state.withLock { $0.shutDown() }
        perform(actions)
    }

    private func wakeUp() {
        let now = clock.now
        let actions = state.withLock { $0.wakeUp(now: now) }
        perform(actions)
    }

    /// Performs the state machine's actions, outside the lock.
    private func perform(_ actions: StateMachine.Actions) {
        for (continuation, permit) in actions.grants {
            continuation.resume(returning: permit)
        }
        for (continuation, error) in actions.failures {
            metrics.recordRejection(error.code)
            continuation.resume(throwing: error)
        }
        for _ in 0..<actions.retriesAdmitted { metrics.recordRetry() }
        for _ in 0..<actions.budgetExhaustions { metrics.recordRetryBudgetExhausted() }
        if let metricsState = actions.metrics { metrics.recordState(metricsState) }
        if let signal = actions.signal { publish?(signal) }
        if let wake = actions.wakeUp {
            // One timer per earlier wake-up; a timer that fires late or needlessly only triggers a harmless dispatch.
            Task { [clock] in
                try? await clock.sleep(until: wake, tolerance: nil)
                self.wakeUp()
            }
        }
    }
}
