import CodedErrors

/// The state of an ``AppleCallGate``: a plain struct whose mutating methods return what the caller must do (resume
/// these waiters, schedule a wake-up, publish a signal), which it does after releasing the lock.
///
/// Generic over the waiter's `Payload` so that the async gate stores continuations and the storm simulation stores
/// job ids: both run exactly this logic.
package struct AppleCallGateStateMachine<Instant: InstantProtocol<Duration>, Payload> where Instant: Sendable {
    package typealias Permit = CallPermit<Instant>

    struct Waiter {
        var endpoint: StoreEndpoint
        var priority: CallPriority
        var deadline: Instant?
        var payload: Payload
        var countedBudgetExhaustion = false
    }

    /// What the caller must do after a state change.
    package struct Actions {
        /// Waiters granted a permit.
        package var grants: [(payload: Payload, permit: Permit)] = []
        /// Waiters that failed (deadline, fail-fast on an open breaker, shutdown).
        package var failures: [(payload: Payload, error: AppleCallGateError)] = []
        /// Schedule a wake-up at this instant (the state machine tracks it; a later wake-up replaces nothing).
        package var wakeUp: Instant?
        /// How many retries were admitted.
        var retriesAdmitted = 0
        /// How many waiting retries newly found the budget spent.
        var budgetExhaustions = 0
        /// Publish this signal.
        var signal: ThrottleSignal?
        /// The gauges after the change.
        var metrics: GateMetricsState? = nil
        /// Whether a reported outcome was taken (false for a second report of the same permit).
        var outcomeAccepted = false
    }

    /// The outcome of a fast-path attempt.
    enum ImmediateResult {
        /// Granted; `actions` is set when the grant changed what waiters may do (a first attempt earned
        /// retry-budget tokens that a waiting retry can use).
        case granted(Permit, actions: Actions?)
        case rejected(AppleCallGateError)
        /// The caller must enqueue and wait.
        case mustWait
    }

    let configuration: AppleCallGateConfiguration
    private var concurrency: AIMDConcurrencyLimit<Instant>
    private var breaker: CircuitBreaker<Instant>
    private var budget: RetryBudget
    /// When the budget last earned its time-based tokens.
    private var budgetEarnedAt: Instant
    private var cluster: ClusterThrottle<Instant>
    private var buckets: [StoreEndpoint: TokenBucket<Instant>] = [:]
    private var localHoldUntil: Instant?
    /// The cluster's constraint, recomputed only when a signal arrives or expires (it is read on every call).
    private var remote = RemoteConstraint<Instant>.none
    private var remoteNextExpiry: Instant?

    private var waiters: [UInt64: Waiter] = [:]
    private var queues: [[UInt64]] = Array(repeating: [], count: CallPriority.allCases.count)
    private var heads: [Int] = Array(repeating: 0, count: CallPriority.allCases.count)
    private var queuedByEndpoint: [[StoreEndpoint: Int]] = Array(repeating: [:], count: CallPriority.allCases.count)
    private var earliestWaiterDeadline: Instant?
    private var nextID: UInt64 = 0
    private var inFlightPermits: Set<UInt64> = []
    private var scheduledWakeUp: Instant?
    private var isShutDown = false

    private var lastPublished: ThrottleSignal?
    private var lastPublishedAt: Instant?

    /// The indices in `configuration.quotaBudgets` of the budgets that count each endpoint's calls.
    private let budgetsByEndpoint: [StoreEndpoint: [Int]]
    /// Each budget's current window, by index; a window that has ended is replaced when next read.
    private var quotaUsage: [Int: QuotaUsage] = [:]
    /// The instant and the wall time this machine started at: quota windows are cut on the wall clock (Google's
    /// minutes and Pacific days) and waited for on the gate's clock.
    private let origin: Instant
    private let originUnixMilliseconds: Int64

    /// A machine starting at `now`, which is `unixMilliseconds` on the wall clock (only quota windows read it).
    package init(configuration: AppleCallGateConfiguration, now: Instant, unixMilliseconds: Int64 = 0) {
        self.configuration = configuration
        var budgetsByEndpoint: [StoreEndpoint: [Int]] = [:]
        for (index, budget) in configuration.quotaBudgets.enumerated() {
            for endpoint in budget.endpoints { budgetsByEndpoint[endpoint, default: []].append(index) }
        }
        self.budgetsByEndpoint = budgetsByEndpoint
        self.origin = now
        self.originUnixMilliseconds = unixMilliseconds
        self.concurrency = AIMDConcurrencyLimit(configuration: configuration.concurrency)
        self.breaker = CircuitBreaker(configuration: configuration.breaker, origin: now)
        self.budget = RetryBudget(
            ratio: configuration.retryBudgetRatio, maximumTokens: configuration.retryBudgetMaximumTokens,
            minimumPerSecond: configuration.retryBudgetMinimumPerSecond)
        self.budgetEarnedAt = now
        self.cluster = ClusterThrottle(
            localWorkerID: configuration.workerID, maximumSignalLifetime: configuration.maximumRemoteSignalLifetime,
            followRemoteOpenBreaker: configuration.followRemoteOpenBreaker)
    }

    // MARK: Reading

    var inFlight: Int { inFlightPermits.count }
    var queuedWaiters: Int { waiters.count }

    func effectiveLimit(now: Instant) -> Int {
        guard let remoteLimit = remote.concurrencyLimit else { return concurrency.limit }
        return max(1, min(concurrency.limit, remoteLimit))
    }

    /// A view at `now`, correct even if no event has refreshed the state since signals expired.
    package func snapshot(now: Instant) -> AppleCallGateSnapshot {
        let live = cluster.constraint(now: now)
        var hold = localHoldUntil
        if let remoteHold = live.holdUntil { hold = max(hold ?? remoteHold, remoteHold) }
        return AppleCallGateSnapshot(
            localLimit: concurrency.limit,
            effectiveLimit: max(1, min(concurrency.limit, live.concurrencyLimit ?? Int.max)), inFlight: inFlight,
            queuedWaiters: queuedWaiters, breakerState: breakerState(now: now), retryBudgetTokens: budget.tokens,
            isHeld: hold.map { $0 > now } ?? false, liveRemoteSignals: cluster.liveSignalCount(now: now))
    }

    private func breakerState(now: Instant) -> BreakerState {
        var copy = breaker
        copy.refresh(now: now)
        return copy.state
    }

    private func metricsState(now: Instant) -> GateMetricsState {
        GateMetricsState(
            concurrencyLimit: effectiveLimit(now: now), inFlight: inFlight, queuedWaiters: queuedWaiters,
            breakerState: breaker.state)
    }

    /// The instant until which every call is held, if it lies after `now`.
    private func holdUntil(now: Instant) -> Instant? {
        var hold = localHoldUntil
        if let remoteHold = remote.holdUntil {
            hold = max(hold ?? remoteHold, remoteHold)
        }
        guard let hold, hold > now else { return nil }
        return hold
    }

    // MARK: Acquiring

    /// Grants at once when nobody of equal or higher priority waits and every limit allows it.
    mutating func acquireImmediately(
        endpoint: StoreEndpoint, priority: CallPriority, deadline: Instant?, now: Instant
    ) -> ImmediateResult {
        if isShutDown { return .rejected(AppleCallGateError(.shutDown)) }
        if let deadline, deadline <= now { return .rejected(AppleCallGateError(.deadlineExceeded)) }
        refresh(now: now)
        if configuration.whenBreakerOpen == .failFast, breaker.admission == .refuse, breaker.state == .open {
            return .rejected(AppleCallGateError(.circuitOpen))
        }
        let quotaRenews = quotaSpentUntil(endpoint: endpoint, now: now)
        if let quotaRenews, let deadline, quotaRenews >= deadline {
            return .rejected(AppleCallGateError(.quotaExhausted))
        }
        if (0...priority.rawValue).contains(where: { queuedByEndpoint[$0].isEmpty == false }) {
            return .mustWait
        }
        guard admissible(priority: priority, now: now), quotaRenews == nil else { return .mustWait }
        guard takeToken(endpoint: endpoint, now: now) else { return .mustWait }
        if priority == .retry {
            guard budget.tryWithdrawRetry() else { return .mustWait }
        }
        let permit = issuePermit(endpoint: endpoint, priority: priority, now: now)
        let actions =
            priority == .firstAttempt && queuedByEndpoint[CallPriority.retry.rawValue].isEmpty == false
            ? dispatch(now: now) : nil
        return .granted(permit, actions: actions)
    }

    /// An id for a waiter about to be enqueued (known before, so that a cancellation handler can name it).
    package mutating func reserveWaiterID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Queues a waiter under an id from ``reserveWaiterID()``, then dispatches (which may grant it at once).
    package mutating func enqueue(
        id: UInt64, endpoint: StoreEndpoint, priority: CallPriority, deadline: Instant?, payload: Payload, now: Instant
    ) -> Actions {
        var actions = Actions()
        if isShutDown {
            actions.failures.append((payload, AppleCallGateError(.shutDown)))
            return actions
        }
        if waiters.count >= configuration.maximumQueuedWaiters {
            actions.failures.append((payload, AppleCallGateError(.queueFull)))
            return actions
        }
        if let renews = quotaSpentUntil(endpoint: endpoint, now: now), let deadline, renews >= deadline {
            actions.failures.append((payload, AppleCallGateError(.quotaExhausted)))
            return actions
        }
        var waiter = Waiter(endpoint: endpoint, priority: priority, deadline: deadline, payload: payload)
        if priority == .retry, budget.canRetry == false {
            waiter.countedBudgetExhaustion = true
            actions.budgetExhaustions += 1
        }
        waiters[id] = waiter
        queues[priority.rawValue].append(id)
        queuedByEndpoint[priority.rawValue][endpoint, default: 0] += 1
        if let deadline {
            earliestWaiterDeadline = min(earliestWaiterDeadline ?? deadline, deadline)
        }
        let exhaustions = actions.budgetExhaustions
        actions = dispatch(now: now)
        actions.budgetExhaustions += exhaustions
        return actions
    }

    /// Removes a waiter whose task was cancelled; returns its payload if it was still waiting.
    mutating func cancel(id: UInt64) -> Payload? {
        guard let waiter = removeWaiter(id: id) else { return nil }
        return waiter.payload
    }

    // MARK: Events

    /// Records the outcome of a granted call, then dispatches.
    package mutating func report(
        _ permit: Permit, outcome: CallOutcome, now: Instant, unixMilliseconds: Int64
    ) -> Actions {
        guard inFlightPermits.remove(permit.id) != nil else { return Actions() }
        let inFlightIncludingThis = inFlight + 1
        refresh(now: now)
        switch outcome {
        case .notSent:
            if permit.isProbe { breaker.returnUnusedProbe() }
        case .success:
            concurrency.recordSuccess(inFlight: inFlightIncludingThis)
            breaker.record(failed: false, wasProbe: permit.isProbe, now: now)
        case .throttled, .timeout, .failure:
            if outcome.isOverload {
                concurrency.recordOverload(issuedAt: permit.issuedAt, now: now)
            }
            breaker.record(failed: true, wasProbe: permit.isProbe, now: now)
            if let retryAfter = outcome.retryAfter, retryAfter > .zero {
                let until = now.advanced(by: min(retryAfter, configuration.maximumRetryAfter))
                localHoldUntil = max(localHoldUntil ?? until, until)
            }
        }
        var actions = dispatch(now: now)
        actions.outcomeAccepted = true
        actions.signal = signalToPublish(now: now, unixMilliseconds: unixMilliseconds)
        return actions
    }

    /// Takes in another worker's signal, then dispatches (a lower limit or a hold takes effect for later grants).
    mutating func ingest(
        _ signal: ThrottleSignal, now: Instant, unixMilliseconds: Int64
    ) -> (
        accepted: Bool, actions: Actions
    ) {
        let accepted = cluster.ingest(signal, now: now, unixMillisecondsNow: unixMilliseconds)
        if accepted { recomputeRemote(now: now) }
        return (accepted, dispatch(now: now))
    }

    /// A scheduled wake-up fired at `now`.
    package mutating func wakeUp(now: Instant) -> Actions {
        if let scheduled = scheduledWakeUp, scheduled <= now { scheduledWakeUp = nil }
        return dispatch(now: now)
    }

    /// Fails every waiter and refuses every later acquisition.
    mutating func shutDown() -> Actions {
        isShutDown = true
        var actions = Actions()
        for id in Array(waiters.keys).sorted() {
            if let waiter = removeWaiter(id: id) {
                actions.failures.append((waiter.payload, AppleCallGateError(.shutDown)))
            }
        }
        return actions
    }

    /// This worker's local throttle state as a signal.
    func localSignal(now: Instant, unixMilliseconds: Int64) -> ThrottleSignal {
        var retryAfterUntil: Int64?
        if let hold = localHoldUntil, hold > now {
            retryAfterUntil = unixMilliseconds + now.duration(to: hold).wholeMilliseconds
        }
        return ThrottleSignal(
            workerID: configuration.workerID, concurrencyLimit: concurrency.limit, breakerState: breakerState(now: now),
            retryAfterUntilUnixMilliseconds: retryAfterUntil, issuedAtUnixMilliseconds: unixMilliseconds,
            expiresAtUnixMilliseconds: unixMilliseconds
                + configuration.publishPolicy.signalLifetime.wholeMilliseconds)
    }

    /// The signal to publish now if the publish policy says so (and records it as published).
    mutating func signalToPublish(now: Instant, unixMilliseconds: Int64) -> ThrottleSignal? {
        // Nothing can be due within the minimum interval: skip building a signal on every report.
        if let last = lastPublishedAt, last.duration(to: now) < configuration.publishPolicy.minimumInterval {
            return nil
        }
        let current = localSignal(now: now, unixMilliseconds: unixMilliseconds)
        let since = lastPublishedAt.map { $0.duration(to: now) }
        guard configuration.publishPolicy.shouldPublish(current: current, last: lastPublished, sinceLast: since)
        else { return nil }
        lastPublished = current
        lastPublishedAt = now
        return current
    }

    // MARK: Internals

    private mutating func refresh(now: Instant) {
        breaker.refresh(now: now)
        if budgetEarnedAt < now {
            budget.earn(over: budgetEarnedAt.duration(to: now))
            budgetEarnedAt = now
        }
        if let expiry = remoteNextExpiry, expiry <= now {
            cluster.expire(now: now)
            recomputeRemote(now: now)
        }
        if let hold = localHoldUntil, hold <= now { localHoldUntil = nil }
    }

    private mutating func recomputeRemote(now: Instant) {
        remote = cluster.constraint(now: now)
        remoteNextExpiry = cluster.nextExpiry
    }

    /// Whether breaker, holds and the concurrency limit let one more call start now.
    private func admissible(priority: CallPriority, now: Instant) -> Bool {
        if holdUntil(now: now) != nil { return false }
        if breaker.admission == .refuse { return false }
        if inFlight >= effectiveLimit(now: now) { return false }
        if priority == .retry, budget.canRetry == false { return false }
        return true
    }

    private mutating func takeToken(endpoint: StoreEndpoint, now: Instant) -> Bool {
        if let bucket = buckets[endpoint] {
            var copy = bucket
            let taken = copy.tryAcquire(now: now)
            buckets[endpoint] = copy
            return taken
        }
        guard let limit = configuration.rateLimits[endpoint] ?? configuration.defaultRateLimit else { return true }
        var bucket = TokenBucket<Instant>(ratePerSecond: limit.ratePerSecond, burst: limit.burst)
        let taken = bucket.tryAcquire(now: now)
        buckets[endpoint] = bucket
        return taken
    }

    private func earliestToken(endpoint: StoreEndpoint, now: Instant) -> Instant {
        buckets[endpoint]?.earliestAdmission(now: now) ?? now
    }

    private func unixMilliseconds(at instant: Instant) -> Int64 {
        originUnixMilliseconds + origin.duration(to: instant).wholeMilliseconds
    }

    /// When every spent budget counting `endpoint` renews, or nil when none is spent.
    private mutating func quotaSpentUntil(endpoint: StoreEndpoint, now: Instant) -> Instant? {
        guard let indices = budgetsByEndpoint[endpoint] else { return nil }
        var renews: Int64?
        for index in indices {
            let usage = currentUsage(index, now: now)
            if usage.used >= configuration.quotaBudgets[index].limit {
                renews = max(renews ?? usage.windowEnd, usage.windowEnd)
            }
        }
        return renews.map { origin.advanced(by: .milliseconds($0 - originUnixMilliseconds)) }
    }

    /// Budget `index`'s window at `now`, a fresh one if the last has ended.
    private mutating func currentUsage(_ index: Int, now: Instant) -> QuotaUsage {
        let wall = unixMilliseconds(at: now)
        if let usage = quotaUsage[index], wall < usage.windowEnd { return usage }
        let usage = QuotaUsage(windowEnd: configuration.quotaBudgets[index].window(containing: wall).end, used: 0)
        quotaUsage[index] = usage
        return usage
    }

    private mutating func spendQuota(endpoint: StoreEndpoint, now: Instant) {
        guard let indices = budgetsByEndpoint[endpoint] else { return }
        for index in indices {
            var usage = currentUsage(index, now: now)
            usage.used += 1
            quotaUsage[index] = usage
        }
    }

    private mutating func issuePermit(endpoint: StoreEndpoint, priority: CallPriority, now: Instant) -> Permit {
        nextID += 1
        let isProbe = breaker.admission == .probe
        if isProbe { breaker.recordProbeIssued() }
        if priority == .firstAttempt { budget.recordFirstAttempt() }
        spendQuota(endpoint: endpoint, now: now)
        inFlightPermits.insert(nextID)
        return Permit(id: nextID, endpoint: endpoint, priority: priority, issuedAt: now, isProbe: isProbe)
    }

    private mutating func removeWaiter(id: UInt64) -> Waiter? {
        guard let waiter = waiters.removeValue(forKey: id) else { return nil }
        let index = waiter.priority.rawValue
        if let count = queuedByEndpoint[index][waiter.endpoint] {
            queuedByEndpoint[index][waiter.endpoint] = count > 1 ? count - 1 : nil
        }
        return waiter
    }

    /// Drops ids of waiters already gone from the front of queue `index`, and compacts the queue now and then.
    private mutating func trimQueue(_ index: Int) {
        while heads[index] < queues[index].count, waiters[queues[index][heads[index]]] == nil {
            heads[index] += 1
        }
        if heads[index] == queues[index].count {
            queues[index].removeAll(keepingCapacity: true)
            heads[index] = 0
        } else if heads[index] > 1024, heads[index] * 2 > queues[index].count {
            queues[index].removeFirst(heads[index])
            heads[index] = 0
        }
    }

    /// Grants every waiter the limits allow, in priority then arrival order; fails expired waiters; works out the
    /// next instant at which something could change without an outside event.
    private mutating func dispatch(now: Instant) -> Actions {
        var actions = Actions()
        refresh(now: now)
        if waiters.isEmpty {
            actions.metrics = metricsState(now: now)
            return actions
        }
        expireWaiters(now: now, into: &actions)
        if configuration.whenBreakerOpen == .failFast, breaker.state == .open {
            for id in Array(waiters.keys).sorted() {
                if let waiter = removeWaiter(id: id) {
                    actions.failures.append((waiter.payload, AppleCallGateError(.circuitOpen)))
                }
            }
        }
        var wakeCandidates: [Instant] = []
        if let hold = holdUntil(now: now) {
            wakeCandidates.append(hold)
        } else if breaker.admission == .refuse {
            if let openUntil = breaker.openUntil { wakeCandidates.append(openUntil) }
        } else {
            grantWaiters(now: now, actions: &actions, wakeCandidates: &wakeCandidates)
        }
        if waiters.isEmpty == false {
            if let deadline = earliestWaiterDeadline { wakeCandidates.append(deadline) }
            if let expiry = remoteNextExpiry { wakeCandidates.append(expiry) }
            if let wake = wakeCandidates.filter({ $0 > now }).min(),
                scheduledWakeUp.map({ wake < $0 || $0 <= now }) ?? true
            {
                scheduledWakeUp = wake
                actions.wakeUp = wake
            }
        }
        actions.metrics = metricsState(now: now)
        return actions
    }

    private mutating func expireWaiters(now: Instant, into actions: inout Actions) {
        guard let earliest = earliestWaiterDeadline, earliest <= now else { return }
        var expired: [UInt64] = []
        var nextEarliest: Instant?
        for (id, waiter) in waiters {
            guard let deadline = waiter.deadline else { continue }
            if deadline <= now {
                expired.append(id)
            } else {
                nextEarliest = min(nextEarliest ?? deadline, deadline)
            }
        }
        earliestWaiterDeadline = nextEarliest
        for id in expired.sorted() {
            if let waiter = removeWaiter(id: id) {
                actions.failures.append((waiter.payload, AppleCallGateError(.deadlineExceeded)))
            }
        }
    }

    private mutating func grantWaiters(now: Instant, actions: inout Actions, wakeCandidates: inout [Instant]) {
        var blockedEndpoints: Set<StoreEndpoint> = []
        for priority in CallPriority.allCases {
            let index = priority.rawValue
            trimQueue(index)
            var position = heads[index]
            while position < queues[index].count {
                guard inFlight < effectiveLimit(now: now), breaker.admission != .refuse else { return }
                if blockedEndpoints.isEmpty == false,
                    queuedByEndpoint[index].keys.allSatisfy({ blockedEndpoints.contains($0) })
                {
                    break
                }
                let id = queues[index][position]
                position += 1
                guard var waiter = waiters[id], blockedEndpoints.contains(waiter.endpoint) == false else { continue }
                if let renews = quotaSpentUntil(endpoint: waiter.endpoint, now: now) {
                    if let deadline = waiter.deadline, renews >= deadline {
                        _ = removeWaiter(id: id)
                        actions.failures.append((waiter.payload, AppleCallGateError(.quotaExhausted)))
                    } else {
                        blockedEndpoints.insert(waiter.endpoint)
                        wakeCandidates.append(renews)
                    }
                    continue
                }
                if priority == .retry, budget.canRetry == false {
                    // Retries wait for first attempts to earn tokens, or for time to (a minimum rate).
                    if let wait = budget.timeUntilRetry { wakeCandidates.append(now.advanced(by: wait)) }
                    if waiter.countedBudgetExhaustion == false {
                        waiter.countedBudgetExhaustion = true
                        waiters[id] = waiter
                        actions.budgetExhaustions += 1
                    }
                    break
                }
                guard takeToken(endpoint: waiter.endpoint, now: now) else {
                    blockedEndpoints.insert(waiter.endpoint)
                    wakeCandidates.append(earliestToken(endpoint: waiter.endpoint, now: now))
                    continue
                }
                if priority == .retry {
                    _ = budget.tryWithdrawRetry()
                    actions.retriesAdmitted += 1
                }
                _ = removeWaiter(id: id)
                let permit = issuePermit(endpoint: waiter.endpoint, priority: priority, now: now)
                actions.grants.append((waiter.payload, permit))
            }
            trimQueue(index)
        }
    }
}
