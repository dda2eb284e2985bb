import Foundation
import RateLimiter
import Testing
import Traffic

private typealias Support = RateLimiterTestSupport

@Suite("RateLimiter cluster throttle")
struct RateLimiterClusterThrottleTests {
    private func signal(
        from worker: String, limit: Int, breaker: BreakerState = .closed, retryAfterUntil: Int64? = nil,
        issuedAt: Int64, lifetime: Int64 = 15_000
    ) -> ThrottleSignal {
        ThrottleSignal(
            workerID: worker, concurrencyLimit: limit, breakerState: breaker,
            retryAfterUntilUnixMilliseconds: retryAfterUntil, issuedAtUnixMilliseconds: issuedAt,
            expiresAtUnixMilliseconds: issuedAt + lifetime)
    }

    @Test("a signal is compact JSON and round-trips; garbage is refused without a crash")
    func json() throws {
        let original = signal(from: "worker-7", limit: 3, breaker: .halfOpen, retryAfterUntil: 5_000, issuedAt: 1_000)
        let data = try original.jsonData()
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(" ") == false)
        #expect(text.contains(#""breaker":"half_open""#))
        #expect(try ThrottleSignal(jsonData: data) == original)
        let gate = AppleCallGate(
            configuration: Support.configuration(limit: 8), clock: ManualClock(), metrics: RateLimiterTestMetrics())
        #expect(gate.ingest(signalJSON: Array("{not json".utf8)) == false)
        #expect(gate.ingest(signalJSON: Array(#"{"v":1}"#.utf8)) == false)
    }

    @Test("another worker's signal lowers the local limit, then expires", .timeLimit(.minutes(2)))
    func lowersAndExpires() async throws {
        let clock = ManualClock()
        let gate = AppleCallGate(
            configuration: Support.configuration(limit: 8), clock: clock, metrics: RateLimiterTestMetrics())
        let now = clock.unixMillisecondsNow
        #expect(gate.ingest(signal(from: "other", limit: 1, issuedAt: now, lifetime: 10_000)))
        #expect(gate.snapshot().effectiveLimit == 1)
        #expect(gate.snapshot().localLimit == 8)
        let first = try await gate.acquire(.verifyReceipt)
        let second = Task { try await gate.acquire(.verifyReceipt) }
        #expect(await Support.eventually { gate.snapshot().queuedWaiters == 1 && clock.sleeperCount >= 1 })
        clock.advance(by: .milliseconds(9_999))
        #expect(gate.snapshot().queuedWaiters == 1)
        clock.advance(by: .milliseconds(1))
        let permit = try await second.value
        #expect(gate.snapshot().effectiveLimit == 8)
        #expect(gate.snapshot().liveRemoteSignals == 0)
        gate.report(first, .success(latency: .zero))
        gate.report(permit, .success(latency: .zero))
    }

    @Test("the most conservative live signal wins; own, stale and older signals are ignored")
    func mostConservative() {
        var throttle = ClusterThrottle<ManualClock.Instant>(localWorkerID: "me")
        let now = Support.at(0)
        func ingest(_ signal: ThrottleSignal) -> Bool {
            throttle.ingest(signal, now: now, unixMillisecondsNow: 1_000)
        }
        #expect(ingest(signal(from: "a", limit: 6, issuedAt: 1_000)))
        #expect(ingest(signal(from: "b", limit: 2, issuedAt: 1_000)))
        #expect(ingest(signal(from: "me", limit: 1, issuedAt: 1_000)) == false, "our own signal")
        #expect(ingest(signal(from: "c", limit: 1, issuedAt: 0, lifetime: 500)) == false, "already expired")
        #expect(ingest(signal(from: "b", limit: 1, issuedAt: 900)) == false, "older than the one held")
        let constraint = throttle.constraint(now: now)
        #expect(constraint.concurrencyLimit == 2)
        #expect(constraint.limitingWorkerID == "b")
        #expect(constraint.holdUntil == nil)
    }

    @Test("a remote Retry-After or open breaker holds calls, never beyond the signal's life")
    func remoteHolds() {
        var throttle = ClusterThrottle<ManualClock.Instant>(localWorkerID: "me", maximumSignalLifetime: .seconds(20))
        let now = Support.at(0)
        throttle.ingest(
            signal(from: "a", limit: 4, retryAfterUntil: 1_000 + 3_000, issuedAt: 1_000), now: now,
            unixMillisecondsNow: 1_000)
        #expect(throttle.constraint(now: now).holdUntil == Support.at(3_000))
        // A clock far ahead, or a huge Retry-After, is capped by the signal's life (itself capped locally).
        throttle.ingest(
            signal(from: "b", limit: 4, breaker: .open, issuedAt: 1_000, lifetime: 3_600_000), now: now,
            unixMillisecondsNow: 1_000)
        #expect(throttle.constraint(now: now).holdUntil == Support.at(20_000))
        throttle.expire(now: Support.at(20_000))
        #expect(throttle.constraint(now: Support.at(20_000)).holdUntil == nil)
        #expect(throttle.liveSignalCount(now: Support.at(20_000)) == 0)
    }

    @Test("signals are published on significant change and as heartbeats, rate-limited", .timeLimit(.minutes(2)))
    func publishing() async throws {
        let clock = ManualClock()
        let published = RateLimiterTestRecorder()
        var configuration = Support.configuration(limit: 1)
        configuration.concurrency = AIMDConfiguration(minimum: 1, maximum: 16, start: 16)
        configuration.breaker = CircuitBreakerConfiguration(minimumCalls: 1_000)
        let gate = AppleCallGate(
            configuration: configuration, clock: clock, metrics: RateLimiterTestMetrics(),
            publish: { published.append("\($0.concurrencyLimit)") })
        #expect(gate.publishSignalIfDue()?.concurrencyLimit == 16, "the first signal goes at once")
        let first = try await gate.acquire(.verifyReceipt)
        gate.report(first, .throttled(retryAfter: nil))
        #expect(published.all == ["16"], "within the minimum interval nothing goes")
        clock.advance(by: .milliseconds(500))
        #expect(gate.publishSignalIfDue()?.concurrencyLimit == 8)
        clock.advance(by: .seconds(1))
        #expect(gate.publishSignalIfDue() == nil, "no change, no heartbeat yet")
        clock.advance(by: .seconds(4))
        let heartbeat = try #require(gate.publishSignalIfDue())
        #expect(heartbeat.expiresAtUnixMilliseconds - heartbeat.issuedAtUnixMilliseconds == 15_000)
        #expect(published.all == ["16", "8", "8"])
    }
}

@Suite("RateLimiter two workers")
struct RateLimiterTwoWorkerThrottleTests {
    @Test("a storm seen by one worker slows the other; its signals fade when it goes quiet", .timeLimit(.minutes(2)))
    func stormSpreads() async throws {
        let clock = ManualClock()
        var configuration = RateLimiterTestSupport.configuration(limit: 1)
        configuration.concurrency = AIMDConfiguration(minimum: 1, maximum: 32, start: 16)
        configuration.breaker = CircuitBreakerConfiguration(minimumCalls: 4, coolDown: .seconds(1))
        var configurationB = configuration
        configuration.workerID = "a"
        configurationB.workerID = "b"
        let workerB = AppleCallGate(configuration: configurationB, clock: clock, metrics: RateLimiterTestMetrics())
        // The control topic, without Kafka: A's publications reach B at once.
        let workerA = AppleCallGate(
            configuration: configuration, clock: clock, metrics: RateLimiterTestMetrics(),
            publish: { workerB.ingest($0) })
        workerA.publishSignalIfDue()
        #expect(workerB.snapshot().effectiveLimit == 16)
        // A sees 21005: its limit halves and, after the minimum interval, B follows.
        let first = try await workerA.acquire(.verifyReceipt)
        clock.advance(by: .milliseconds(500))
        workerA.report(first, .throttled(retryAfter: nil))
        #expect(workerB.snapshot().effectiveLimit == 8)
        #expect(workerB.snapshot().localLimit == 16)
        // More failures open A's breaker: B holds its calls too.
        for _ in 0..<3 {
            let permit = try await workerA.acquire(.verifyReceipt)
            clock.advance(by: .milliseconds(200))
            workerA.report(permit, .throttled(retryAfter: nil))
        }
        #expect(workerA.snapshot().breakerState == .open)
        workerA.publishSignalIfDue()
        #expect(workerB.snapshot().isHeld)
        // A goes silent (crashed): B's view of it expires with the signal's lifetime.
        clock.advance(by: .seconds(15))
        let snapshot = workerB.snapshot()
        #expect(snapshot.isHeld == false)
        #expect(snapshot.effectiveLimit == 16)
        let permit = try await workerB.acquire(.verifyReceipt)
        workerB.report(permit, .success(latency: .milliseconds(100)))
    }
}
