import CodedErrors
import Testing

@testable import RateLimiter

private typealias Support = RateLimiterTestSupport

@Suite("RateLimiter AppleCallGate")
struct RateLimiterAppleCallGateTests {
    private func makeGate(
        _ configuration: AppleCallGateConfiguration, clock: ManualClock = ManualClock(),
        metrics: RateLimiterTestMetrics = RateLimiterTestMetrics()
    ) -> AppleCallGate<ManualClock> {
        AppleCallGate(configuration: configuration, clock: clock, metrics: metrics)
    }

    /// Starts a task that acquires, records `name`, and reports success; returns once it is queued.
    private func startWaiter(
        _ name: String, gate: AppleCallGate<ManualClock>, priority: CallPriority = .firstAttempt,
        recorder: RateLimiterTestRecorder
    ) async -> Task<Void, any Error> {
        let queuedBefore = gate.snapshot().queuedWaiters
        let task = Task {
            let permit = try await gate.acquire(.verifyReceipt, priority: priority)
            recorder.append(name)
            gate.report(permit, .success(latency: .milliseconds(100)))
        }
        let queued = await Support.eventually { gate.snapshot().queuedWaiters == queuedBefore + 1 }
        #expect(queued, "\(name) should be waiting")
        return task
    }

    @Test("waiters are served first come, first served", .timeLimit(.minutes(2)))
    func fifo() async throws {
        let gate = makeGate(Support.configuration(limit: 1))
        let recorder = RateLimiterTestRecorder()
        let held = try await gate.acquire(.verifyReceipt)
        var tasks: [Task<Void, any Error>] = []
        for name in ["a", "b", "c", "d", "e"] {
            tasks.append(await startWaiter(name, gate: gate, recorder: recorder))
        }
        gate.report(held, .success(latency: .milliseconds(100)))
        for task in tasks { try await task.value }
        #expect(recorder.all == ["a", "b", "c", "d", "e"])
        #expect(gate.snapshot().inFlight == 0)
        #expect(gate.snapshot().queuedWaiters == 0)
    }

    @Test("a waiting first attempt goes before an earlier retry", .timeLimit(.minutes(2)))
    func firstAttemptsBeforeRetries() async throws {
        let metrics = RateLimiterTestMetrics()
        let gate = makeGate(Support.configuration(limit: 1), metrics: metrics)
        let recorder = RateLimiterTestRecorder()
        let held = try await gate.acquire(.verifyReceipt)
        let retry1 = await startWaiter("retry-1", gate: gate, priority: .retry, recorder: recorder)
        let retry2 = await startWaiter("retry-2", gate: gate, priority: .retry, recorder: recorder)
        let fresh = await startWaiter("fresh", gate: gate, recorder: recorder)
        gate.report(held, .success(latency: .milliseconds(100)))
        for task in [retry1, retry2, fresh] { try await task.value }
        #expect(recorder.all == ["fresh", "retry-1", "retry-2"])
        #expect(metrics.snapshot.retries == 2)
    }

    @Test("cancelling a waiter removes it and leaks nothing", .timeLimit(.minutes(2)))
    func cancellation() async throws {
        let metrics = RateLimiterTestMetrics()
        let gate = makeGate(Support.configuration(limit: 1), metrics: metrics)
        let recorder = RateLimiterTestRecorder()
        let held = try await gate.acquire(.verifyReceipt)
        let cancelled = await startWaiter("cancelled", gate: gate, recorder: recorder)
        let kept = await startWaiter("kept", gate: gate, recorder: recorder)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(gate.snapshot().queuedWaiters == 1)
        gate.report(held, .success(latency: .milliseconds(100)))
        try await kept.value
        #expect(recorder.all == ["kept"])
        let snapshot = gate.snapshot()
        #expect(snapshot.inFlight == 0 && snapshot.queuedWaiters == 0)
        // The slot is free: a new caller goes at once.
        let permit = try await gate.acquire(.verifyReceipt)
        gate.report(permit, .notSent)
    }

    @Test("a cancelled task never gets a permit", .timeLimit(.minutes(2)))
    func cancelledBeforeWaiting() async throws {
        let gate = makeGate(Support.configuration(limit: 1))
        let held = try await gate.acquire(.verifyReceipt)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await gate.acquire(.verifyReceipt)
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(gate.snapshot().queuedWaiters == 0)
        gate.report(held, .notSent)
    }

    @Test("Retry-After holds every call until its deadline", .timeLimit(.minutes(2)))
    func retryAfterHolds() async throws {
        let clock = ManualClock()
        let gate = makeGate(Support.configuration(limit: 4), clock: clock)
        let first = try await gate.acquire(.verifyReceipt)
        gate.report(first, .throttled(retryAfter: .seconds(2)))
        #expect(gate.snapshot().isHeld)
        let waiter = Task { try await gate.acquire(.verifyReceipt) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 })
        #expect(await Support.eventually { clock.sleeperCount >= 1 }, "a wake-up is scheduled for the hold's end")
        clock.advance(by: .milliseconds(1_999))
        #expect(gate.snapshot().queuedWaiters == 1)
        clock.advance(by: .milliseconds(1))
        let permit = try await waiter.value
        #expect(permit.issuedAt == Support.at(2_000))
        #expect(gate.currentSignal().retryAfterUntilUnixMilliseconds == nil)
        gate.report(permit, .success(latency: .milliseconds(50)))
    }

    @Test("a waiter whose deadline passes gets deadlineExceeded", .timeLimit(.minutes(2)))
    func deadline() async throws {
        let clock = ManualClock()
        let metrics = RateLimiterTestMetrics()
        let gate = makeGate(Support.configuration(limit: 1), clock: clock, metrics: metrics)
        let held = try await gate.acquire(.verifyReceipt)
        let waiter = Task { try await gate.acquire(.verifyReceipt, deadline: Support.at(500)) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 && clock.sleeperCount >= 1 })
        clock.advance(to: Support.at(500))
        await #expect(throws: AppleCallGateError(.deadlineExceeded).self) { try await waiter.value }
        do {
            _ = try await waiter.value
        } catch let error as AppleCallGateError {
            #expect(error.code == .deadlineExceeded)
            #expect(error.isRetryable)
        }
        #expect(metrics.snapshot.rejections == [.deadlineExceeded])
        gate.report(held, .notSent)
    }

    @Test("an open breaker fails fast when configured so", .timeLimit(.minutes(2)))
    func failFast() async throws {
        let gate = makeGate(Support.configuration(limit: 20, whenBreakerOpen: .failFast))
        for _ in 0..<10 {
            let permit = try await gate.acquire(.verifyReceipt)
            gate.report(permit, .failure)
        }
        #expect(gate.snapshot().breakerState == .open)
        do {
            _ = try await gate.acquire(.verifyReceipt)
            Issue.record("expected circuitOpen")
        } catch let error as AppleCallGateError {
            #expect(error.code == .circuitOpen)
        }
    }

    @Test("an open breaker holds waiters until the cool-down, then lets probes through", .timeLimit(.minutes(2)))
    func breakerWaitsThenProbes() async throws {
        let clock = ManualClock()
        let breaker = CircuitBreakerConfiguration(minimumCalls: 4, coolDown: .seconds(1), probeCalls: 2)
        let gate = makeGate(Support.configuration(limit: 20, breaker: breaker), clock: clock)
        for _ in 0..<4 {
            let permit = try await gate.acquire(.verifyReceipt)
            gate.report(permit, .failure)
        }
        #expect(gate.snapshot().breakerState == .open)
        // Queued one at a time, so that the gate's queue holds them in this order: the two probes go to the first two
        // (tasks started together may reach the gate in any order, and the test would then wait on the third).
        var queued: [Task<AppleCallGate<ManualClock>.Permit, any Error>] = []
        for index in 0..<3 {
            queued.append(Task { try await gate.acquire(.verifyReceipt) })
            #expect(await Support.eventually { gate.snapshot().queuedWaiters == index + 1 })
        }
        let waiters = queued
        // Cancelled with the test (its time limit): a waiter the gate never admits must not hold the run.
        try await withTaskCancellationHandler {
            try await breakerProbes(gate, clock, waiters)
        } onCancel: {
            for waiter in waiters { waiter.cancel() }
        }
    }

    private func breakerProbes(
        _ gate: AppleCallGate<ManualClock>, _ clock: ManualClock,
        _ waiters: [Task<AppleCallGate<ManualClock>.Permit, any Error>]
    ) async throws {
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 3 && clock.sleeperCount >= 1 })
        clock.advance(by: .seconds(1))
        let probe1 = try await waiters[0].value
        let probe2 = try await waiters[1].value
        #expect(probe1.isProbe && probe2.isProbe)
        #expect(gate.snapshot().queuedWaiters == 1, "only two probes in half-open state")
        gate.report(probe1, .success(latency: .milliseconds(100)))
        gate.report(probe2, .success(latency: .milliseconds(100)))
        let normal = try await waiters[2].value
        #expect(normal.isProbe == false)
        #expect(gate.snapshot().breakerState == .closed)
        gate.report(normal, .success(latency: .milliseconds(100)))
    }

    @Test("AIMD inside the gate: halves on 21005 and grows back under load", .timeLimit(.minutes(2)))
    func adaptiveLimitInGate() async throws {
        let clock = ManualClock()
        var configuration = Support.configuration(limit: 1)
        configuration.concurrency = AIMDConfiguration(minimum: 1, maximum: 16, start: 8)
        configuration.breaker = CircuitBreakerConfiguration(minimumCalls: 1_000)
        let gate = makeGate(configuration, clock: clock)
        var permits: [AppleCallGate<ManualClock>.Permit] = []
        for _ in 0..<8 { permits.append(try await gate.acquire(.verifyReceipt)) }
        clock.advance(by: .milliseconds(100))
        gate.report(permits.removeFirst(), .throttled(retryAfter: nil))
        #expect(gate.snapshot().localLimit == 4)
        gate.report(permits.removeFirst(), .throttled(retryAfter: nil))
        #expect(gate.snapshot().localLimit == 4, "calls issued before the cut are the same congestion event")
        for permit in permits { gate.report(permit, .success(latency: .milliseconds(100))) }
        // Keep the limit full: it grows back by about one per window of `limit` successes.
        for _ in 0..<200 {
            let limit = gate.snapshot().localLimit
            var batch: [AppleCallGate<ManualClock>.Permit] = []
            for _ in 0..<limit { batch.append(try await gate.acquire(.verifyReceipt)) }
            clock.advance(by: .milliseconds(100))
            for permit in batch { gate.report(permit, .success(latency: .milliseconds(100))) }
        }
        #expect(gate.snapshot().localLimit == 16)
    }

    @Test("a retry waits while the budget is spent and goes once first attempts earn a token", .timeLimit(.minutes(2)))
    func retryBudgetInGate() async throws {
        let metrics = RateLimiterTestMetrics()
        let gate = makeGate(Support.configuration(limit: 100, retryBudgetMaximumTokens: 1), metrics: metrics)
        let retry = try await gate.acquire(.verifyReceipt, priority: .retry)
        gate.report(retry, .success(latency: .zero))
        #expect(gate.snapshot().retryBudgetTokens == 0)
        let waiting = Task { try await gate.acquire(.verifyReceipt, priority: .retry) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 })
        #expect(metrics.snapshot.budgetExhausted == 1)
        for _ in 0..<9 {
            let permit = try await gate.acquire(.verifyReceipt)
            gate.report(permit, .success(latency: .zero))
        }
        #expect(gate.snapshot().queuedWaiters == 1)
        let permit = try await gate.acquire(.verifyReceipt)
        let granted = try await waiting.value
        #expect(granted.priority == .retry)
        gate.report(permit, .success(latency: .zero))
        gate.report(granted, .success(latency: .zero))
        #expect(metrics.snapshot.retries == 2)
    }

    @Test("per-endpoint rate limits: a throttled endpoint does not block another", .timeLimit(.minutes(2)))
    func endpointRateLimits() async throws {
        let clock = ManualClock()
        var configuration = Support.configuration(limit: 100)
        configuration.rateLimits = [
            .transactionInfo: EndpointRateLimit(ratePerSecond: 10, burst: 1),
            .verifyReceipt: EndpointRateLimit(ratePerSecond: 1_000, burst: 10),
        ]
        let gate = makeGate(configuration, clock: clock)
        let first = try await gate.acquire(.transactionInfo)
        let blocked = Task { try await gate.acquire(.transactionInfo) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 })
        let other = try await gate.acquire(.verifyReceipt)
        #expect(await Support.eventually { clock.sleeperCount >= 1 })
        clock.advance(by: .milliseconds(100))
        let second = try await blocked.value
        #expect(second.issuedAt == Support.at(100))
        for permit in [first, other, second] { gate.report(permit, .success(latency: .zero)) }
    }

    @Test("shutting down fails waiters; metrics follow the state", .timeLimit(.minutes(2)))
    func shutDownAndMetrics() async throws {
        let metrics = RateLimiterTestMetrics()
        let gate = makeGate(Support.configuration(limit: 1), metrics: metrics)
        let held = try await gate.acquire(.verifyReceipt)
        let waiter = Task { try await gate.acquire(.verifyReceipt) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 })
        #expect(metrics.snapshot.states.last?.queuedWaiters == 1)
        gate.shutDown()
        await #expect(throws: AppleCallGateError.self) { try await waiter.value }
        gate.report(held, .timeout)
        gate.report(held, .timeout)  // a second report of the same permit is ignored
        let recorded = metrics.snapshot
        #expect(recorded.rejections == [.shutDown])
        #expect(recorded.states.last?.inFlight == 0)
        #expect(recorded.outcomes == [.timeout])
    }

    @Test("a full queue refuses more waiters with queueFull", .timeLimit(.minutes(2)))
    func queueFull() async throws {
        var configuration = Support.configuration(limit: 1)
        configuration.maximumQueuedWaiters = 1
        let metrics = RateLimiterTestMetrics()
        let gate = makeGate(configuration, metrics: metrics)
        let held = try await gate.acquire(.verifyReceipt)
        let waiter = Task { try await gate.acquire(.verifyReceipt) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 })
        await #expect(throws: AppleCallGateError(.queueFull)) { try await gate.acquire(.verifyReceipt) }
        #expect(metrics.snapshot.rejections == [.queueFull])
        gate.report(held, .success(latency: .zero))
        gate.report(try await waiter.value, .success(latency: .zero))
    }

    @Test("the swift-metrics sink accepts every measurement without a bootstrapped backend")
    func swiftMetricsSink() async throws {
        let gate = AppleCallGate(
            configuration: Support.configuration(limit: 2), clock: ManualClock(),
            metrics: SwiftMetricsRateLimiterMetrics(gateLabel: "test"))
        let permit = try await gate.acquire(.verifyReceipt, priority: .retry)
        gate.report(permit, .throttled(retryAfter: .seconds(1)))
        #expect(gate.snapshot().inFlight == 0)
    }
}
