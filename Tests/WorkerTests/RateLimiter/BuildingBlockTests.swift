import Messages
import Testing

@testable import RateLimiter

private typealias Support = RateLimiterTestSupport

@Suite("RateLimiter token bucket")
struct RateLimiterTokenBucketTests {
    @Test("never admits more than rate × window + burst over any window")
    func neverExceedsRatePlusBurst() {
        let rate = 50.0
        let burst = 5
        var bucket = TokenBucket<ManualClock.Instant>(ratePerSecond: rate, burst: burst)
        var random = SplitMix64(seed: 7)
        var admitted: [Int] = []  // microseconds
        var time = 0
        // Bursty offered load: quiet gaps and dense bursts, far above the rate.
        while time < 20_000_000 {
            let dense = Int.random(in: 0..<10, using: &random) < 8
            time += Int.random(in: 0...(dense ? 2_000 : 300_000), using: &random)
            let now = ManualClock.Instant(offset: .microseconds(time))
            if bucket.tryAcquire(now: now) { admitted.append(time) }
        }
        #expect(admitted.count > 300)
        for start in admitted.indices {
            for end in start..<admitted.count {
                let window = Double(admitted[end] - admitted[start]) / 1_000_000
                let allowed = Double(burst) + rate * window
                if Double(end - start + 1) > allowed + 1e-9 {
                    Issue.record("\(end - start + 1) admissions in \(window) s, more than \(allowed)")
                    return
                }
                if window > 2 { break }
            }
        }
    }

    @Test("earliestAdmission says when the next token arrives")
    func earliestAdmission() {
        var bucket = TokenBucket<ManualClock.Instant>(ratePerSecond: 10, burst: 2)
        let zero = Support.at(0)
        let result1 = bucket.tryAcquire(now: zero)
        #expect(result1)
        let result2 = bucket.tryAcquire(now: zero)
        #expect(result2)
        let result3 = bucket.tryAcquire(now: zero)
        #expect(result3 == false)
        #expect(bucket.earliestAdmission(now: zero) == Support.at(100))
        let result4 = bucket.tryAcquire(now: Support.at(99))
        #expect(result4 == false)
        let result5 = bucket.tryAcquire(now: Support.at(100))
        #expect(result5)
    }

    @Test("the sandbox allows a tenth of production")
    func sandboxIsTenPercent() {
        #expect(EndpointRateLimit.appStoreServerAPI(.production).ratePerSecond == 50)
        #expect(EndpointRateLimit.appStoreServerAPI(.sandbox).ratePerSecond == 5)
    }
}

@Suite("RateLimiter AIMD concurrency limit")
struct RateLimiterAIMDConcurrencyLimitTests {
    @Test("halves on overload, once per congestion event")
    func halvesOnOverload() {
        var limit = AIMDConcurrencyLimit<ManualClock.Instant>(
            configuration: AIMDConfiguration(minimum: 1, maximum: 64, start: 20))
        let firstCut = limit.recordOverload(issuedAt: Support.at(0), now: Support.at(100))
        #expect(firstCut)
        #expect(limit.limit == 10)
        // A call issued before the decrease reports the same event: no second cut.
        let sameEvent = limit.recordOverload(issuedAt: Support.at(50), now: Support.at(120))
        #expect(sameEvent == false)
        #expect(limit.limit == 10)
        let secondCut = limit.recordOverload(issuedAt: Support.at(150), now: Support.at(250))
        #expect(secondCut)
        #expect(limit.limit == 5)
        for step in 0..<10 {
            limit.recordOverload(issuedAt: Support.at(1000 * (step + 1)), now: Support.at(1000 * (step + 1) + 1))
        }
        #expect(limit.limit == 1)
    }

    @Test("grows back under success while the limit is used, not while idle")
    func growsBackWhenUsed() {
        var limit = AIMDConcurrencyLimit<ManualClock.Instant>(
            configuration: AIMDConfiguration(minimum: 1, maximum: 32, start: 16))
        limit.recordOverload(issuedAt: Support.at(0), now: Support.at(1))
        #expect(limit.limit == 8)
        for _ in 0..<1000 { limit.recordSuccess(inFlight: 1) }
        #expect(limit.limit == 8, "an idle worker must not creep up")
        var successes = 0
        while limit.limit < 16 {
            limit.recordSuccess(inFlight: limit.limit)
            successes += 1
        }
        // About one step per window of `limit` successes: 8 + 9 + … + 15 = 92.
        #expect(successes > 60 && successes < 120)
        for _ in 0..<10_000 { limit.recordSuccess(inFlight: 64) }
        #expect(limit.limit == 32)
    }
}

@Suite("RateLimiter retry policy and budget")
struct RateLimiterRetryPolicyTests {
    @Test("full-jitter delays stay within [0, min(cap, base × 2^n)]")
    func jitterBounds() {
        let policy = RetryPolicy(base: .milliseconds(100), maximumBackoff: .seconds(3), maximumAttempts: 10)
        var random = SplitMix64(seed: 1)
        for retryIndex in 0..<8 {
            let ceiling = min(Duration.seconds(3), .milliseconds(100) * (1 << retryIndex))
            #expect(policy.maximumDelay(retryIndex: retryIndex) == ceiling)
            for _ in 0..<2_000 {
                let delay = policy.jitteredDelay(retryIndex: retryIndex, using: &random)
                #expect(delay >= .zero && delay <= ceiling)
            }
        }
        #expect(policy.maximumDelay(retryIndex: 200) == .seconds(3))
    }

    @Test("the mean full-jitter delay is half the cap")
    func jitterMean() {
        let policy = RetryPolicy(base: .milliseconds(100), maximumBackoff: .seconds(2), maximumAttempts: 10)
        var random = SplitMix64(seed: 2026)
        let samples = 50_000
        var total = 0.0
        for _ in 0..<samples {
            let delay = policy.jitteredDelay(retryIndex: 10, using: &random)
            total += Double(delay.components.seconds) + Double(delay.components.attoseconds) * 1e-18
        }
        let mean = total / Double(samples)
        // Uniform on [0, 2]: mean 1, standard error 2/sqrt(12 × 50 000) ≈ 0.0026; allow 4 %.
        #expect(abs(mean - 1.0) < 0.04, "mean \(mean)")
    }

    @Test("Retry-After is a floor, attempts and deadline stop retries, answers are not retried")
    func decisions() {
        let policy = RetryPolicy(base: .milliseconds(100), maximumBackoff: .seconds(1), maximumAttempts: 3)
        var random = SplitMix64(seed: 3)
        #expect(
            policy.decide(
                attempt: 1, outcome: .throttled(retryAfter: .seconds(5)), remainingUntilDeadline: nil, using: &random)
                == .retry(after: .seconds(5)))
        #expect(
            policy.decide(attempt: 3, outcome: .timeout, remainingUntilDeadline: nil, using: &random)
                == .stop(.attemptsExhausted))
        #expect(
            policy.decide(
                attempt: 1, outcome: .throttled(retryAfter: .seconds(5)), remainingUntilDeadline: .seconds(2),
                using: &random) == .stop(.deadlineExceeded))
        #expect(
            policy.decide(attempt: 1, outcome: .success(latency: .zero), remainingUntilDeadline: nil, using: &random)
                == .stop(.notRetryable))
        if case .retry(let delay) = policy.decide(
            attempt: 2, outcome: .failure, remainingUntilDeadline: nil, using: &random)
        {
            #expect(delay <= .milliseconds(200))
        } else {
            Issue.record("a failure on attempt 2 of 3 should be retried")
        }
    }

    @Test("a minimum rate lets retries go on with no first attempts, at that rate and no faster")
    func budgetMinimumRate() {
        var budget = RetryBudget(ratio: 0.1, maximumTokens: 2, minimumPerSecond: 4)
        let first = budget.tryWithdrawRetry()
        let second = budget.tryWithdrawRetry()
        #expect(first && second)
        #expect(!budget.canRetry)
        #expect(budget.timeUntilRetry == .milliseconds(250))
        budget.earn(over: .milliseconds(100))
        #expect(!budget.canRetry)
        #expect(budget.timeUntilRetry == .milliseconds(150))
        budget.earn(over: .milliseconds(150))
        let third = budget.tryWithdrawRetry()
        #expect(third)
        #expect(!budget.canRetry)
        // Time never fills more than the burst.
        budget.earn(over: .seconds(60))
        #expect(budget.tokens == 2)
        #expect(RetryBudget(ratio: 0.1, maximumTokens: 1).timeUntilRetry == nil)
    }

    @Test("retries stop when the budget is spent and resume as first attempts earn tokens")
    func budget() {
        var budget = RetryBudget(ratio: 0.1, maximumTokens: 5)
        var retries = 0
        while budget.tryWithdrawRetry() { retries += 1 }
        #expect(retries == 5)
        #expect(budget.canRetry == false)
        for _ in 0..<9 { budget.recordFirstAttempt() }
        let result9 = budget.tryWithdrawRetry()
        #expect(result9 == false)
        budget.recordFirstAttempt()
        let result10 = budget.tryWithdrawRetry()
        #expect(result10)
        // Over a long run retries are at most 10 % of first attempts.
        var admitted = 0
        for _ in 0..<1_000 {
            budget.recordFirstAttempt()
            if budget.tryWithdrawRetry() { admitted += 1 }
        }
        #expect(admitted <= 100)
        #expect(admitted >= 99)
    }
}

@Suite("RateLimiter circuit breaker")
struct RateLimiterCircuitBreakerTests {
    private func breaker() -> CircuitBreaker<ManualClock.Instant> {
        CircuitBreaker(
            configuration: CircuitBreakerConfiguration(
                window: .seconds(2), windowSlots: 4, minimumCalls: 10, failureRatioThreshold: 0.5,
                coolDown: .seconds(1), maximumCoolDown: .seconds(4), probeCalls: 2),
            origin: Support.at(0))
    }

    @Test("opens at the failure ratio once enough calls ended, not before")
    func opens() {
        var breaker = breaker()
        for index in 0..<4 { breaker.record(failed: true, wasProbe: false, now: Support.at(index)) }
        #expect(breaker.state == .closed, "fewer than the minimum calls")
        for index in 0..<5 { breaker.record(failed: false, wasProbe: false, now: Support.at(10 + index)) }
        #expect(breaker.state == .closed)
        breaker.record(failed: true, wasProbe: false, now: Support.at(20))
        #expect(breaker.state == .open)
        #expect(breaker.admission == .refuse)
        #expect(breaker.openUntil == Support.at(1020))
    }

    @Test("old outcomes leave the window")
    func windowSlides() {
        var breaker = breaker()
        for index in 0..<9 { breaker.record(failed: true, wasProbe: false, now: Support.at(index)) }
        for index in 0..<10 { breaker.record(failed: false, wasProbe: false, now: Support.at(3_000 + index)) }
        #expect(breaker.state == .closed)
        #expect(breaker.failureRatio(now: Support.at(3_010)) == 0)
    }

    @Test("half-opens after the cool-down, closes when the probes succeed")
    func halfOpenThenClose() {
        var breaker = breaker()
        for index in 0..<10 { breaker.record(failed: true, wasProbe: false, now: Support.at(index)) }
        #expect(breaker.state == .open)
        breaker.refresh(now: Support.at(500))
        #expect(breaker.state == .open)
        breaker.refresh(now: Support.at(1_009))
        #expect(breaker.state == .halfOpen)
        #expect(breaker.admission == .probe)
        breaker.recordProbeIssued()
        breaker.recordProbeIssued()
        #expect(breaker.admission == .refuse, "only `probeCalls` probes")
        breaker.record(failed: false, wasProbe: true, now: Support.at(1_100))
        #expect(breaker.state == .halfOpen)
        breaker.record(failed: false, wasProbe: true, now: Support.at(1_150))
        #expect(breaker.state == .closed)
        #expect(breaker.admission == .call)
    }

    @Test("a failed probe re-opens it with a longer cool-down")
    func probeFailureReopens() {
        var breaker = breaker()
        for index in 0..<10 { breaker.record(failed: true, wasProbe: false, now: Support.at(index)) }
        breaker.refresh(now: Support.at(1_009))
        breaker.recordProbeIssued()
        breaker.record(failed: true, wasProbe: true, now: Support.at(1_100))
        #expect(breaker.state == .open)
        #expect(breaker.openUntil == Support.at(3_100))
        breaker.refresh(now: Support.at(3_100))
        breaker.recordProbeIssued()
        breaker.record(failed: true, wasProbe: true, now: Support.at(3_200))
        #expect(breaker.openUntil == Support.at(7_200))
        breaker.refresh(now: Support.at(7_200))
        breaker.recordProbeIssued()
        breaker.record(failed: true, wasProbe: true, now: Support.at(7_300))
        #expect(breaker.openUntil == Support.at(11_300), "capped at the maximum cool-down")
    }
}

@Suite("RateLimiter manual clock")
struct RateLimiterManualClockTests {
    @Test("sleepers wake when the clock reaches their deadline, in order", .timeLimit(.minutes(2)))
    func wakesInOrder() async throws {
        let clock = ManualClock()
        let recorder = RateLimiterTestRecorder()
        let late = Task {
            try await clock.sleep(until: Support.at(200), tolerance: nil)
            recorder.append("late")
        }
        let early = Task {
            try await clock.sleep(until: Support.at(100), tolerance: nil)
            recorder.append("early")
        }
        #expect(await Support.eventually { clock.sleeperCount == 2 })
        #expect(clock.nextDeadline == Support.at(100))
        clock.advance(by: .milliseconds(150))
        try await early.value
        #expect(recorder.all == ["early"])
        clock.advance(to: Support.at(200))
        try await late.value
        #expect(recorder.all == ["early", "late"])
        #expect(clock.now == Support.at(200))
        #expect(clock.unixMillisecondsNow == 1_767_225_600_200)
    }

    @Test("a cancelled sleeper throws and leaves", .timeLimit(.minutes(2)))
    func cancellation() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(until: Support.at(1_000), tolerance: nil) }
        #expect(await Support.eventually { clock.sleeperCount == 1 })
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }
}
