import AppleClients
import CodedErrors
import Foundation
import Logging
import Metrics
import Observability
import RateLimiter
import StoreHTTP

/// Calls Apple on a job's behalf through the worker's ``AppleCallGate``: waits for a permit, reports how the call
/// went (so the gate's limits adapt), and retries temporary failures with full-jitter backoff until the job's
/// deadline. The clients never sleep or retry on their own; this is the only retry loop of the worker.
public struct AppleCaller: Sendable {
    /// What came of asking Apple.
    public enum Result<Answer: Sendable>: Sendable {
        case answered(Answer)
        /// Apple could not be asked, or kept refusing, until the deadline (or the failure cannot be retried).
        case unavailable(reason: String)
    }

    public let gate: AppleCallGate<ContinuousClock>
    public let retryPolicy: RetryPolicy
    let logger: Logger

    public init(gate: AppleCallGate<ContinuousClock>, retryPolicy: RetryPolicy, logger: Logger) {
        self.gate = gate
        self.retryPolicy = retryPolicy
        self.logger = logger
    }

    /// Runs `call` through the gate until it answers, fails for good, or `deadline` passes.
    /// Throws only `CancellationError`. `status` labels an answer in `verify_apple_calls_total`: `ok`, or what Apple
    /// refused (an answer that is a refusal, such as verifyReceipt 21004 or the Server API's 401, is still an answer
    /// for the gate, but not `ok`).
    ///
    /// Thousands of jobs wait here for a permit, each keeping this function's frame: the bookkeeping after a call
    /// is in ``settle(_:permit:endpoint:attempt:latency:)`` (never inlined, so its locals are not in the frame),
    /// and callers pass a small `Answer` (a class such as ``AppleAnswerBox``): the frame holds a slot per value of
    /// type `Answer`.
    public func call<Answer: Sendable>(
        _ endpoint: StoreEndpoint, deadline: ContinuousClock.Instant,
        status: (Answer) -> String = { _ in "ok" },
        _ call: () async throws -> AppleOutcome<Answer>
    ) async throws -> Result<Answer> {
        let clock = ContinuousClock()
        var attempt = 1
        var lastProblem = "no attempt made"
        while true {
            let permit: AppleCallGate<ContinuousClock>.Permit
            do {
                permit = try await gate.acquire(
                    endpoint, priority: attempt == 1 ? .firstAttempt : .retry, deadline: deadline)
            } catch let error as AppleCallGateError {
                return .unavailable(reason: "\(error.code.rawValue) after \(lastProblem)")
            }
            let started = clock.now
            let outcome: AppleOutcome<Answer>
            do {
                outcome = try await call()
            } catch {
                gate.report(permit, .notSent)
                throw error
            }
            let latency = started.duration(to: clock.now)
            let advice: AppleRetryAdvice
            switch outcome {
            case .answered(let answer):
                reportAnswered(permit, endpoint: endpoint, latency: latency, status: status(answer))
                return .answered(answer)
            case .failed(let error):
                return .unavailable(reason: reportFailed(permit, endpoint: endpoint, latency: latency, error))
            case .retryable(let retryAdvice):
                advice = retryAdvice
            }
            switch reportRetryable(
                permit, endpoint: endpoint, latency: latency, advice, attempt: attempt, deadline: deadline)
            {
            case .stop(let reason):
                return .unavailable(reason: reason)
            case .retry(let delay, let problem):
                lastProblem = problem
                try await Task.sleep(for: delay)
                attempt += 1
            }
        }
    }

    /// What to do after a retryable answer.
    enum RetryStep {
        case stop(reason: String)
        case retry(after: Duration, problem: String)
    }

    @inline(never)
    private func recordLatency(_ endpoint: StoreEndpoint, _ latency: Duration) {
        Timer(label: MetricNames.appleLatency, dimensions: [("endpoint", endpoint.name)])
            .recordNanoseconds(latency.nanosecondsClamped)
    }

    @inline(never)
    private func reportAnswered(
        _ permit: AppleCallGate<ContinuousClock>.Permit, endpoint: StoreEndpoint, latency: Duration, status: String
    ) {
        recordLatency(endpoint, latency)
        gate.report(permit, .success(latency: latency))
        Counter(label: MetricNames.appleCalls, dimensions: [("endpoint", endpoint.name), ("status", status)])
            .increment()
    }

    /// Reports a call that failed for good; returns the reason.
    @inline(never)
    private func reportFailed(
        _ permit: AppleCallGate<ContinuousClock>.Permit, endpoint: StoreEndpoint, latency: Duration,
        _ error: AppleClientError
    ) -> String {
        recordLatency(endpoint, latency)
        gate.report(permit, .failure)
        Counter(label: MetricNames.appleCalls, dimensions: [("endpoint", endpoint.name), ("status", "failed")])
            .increment()
        return error.code.description
    }

    /// Reports a retryable answer and decides whether to retry.
    @inline(never)
    private func reportRetryable(
        _ permit: AppleCallGate<ContinuousClock>.Permit, endpoint: StoreEndpoint, latency: Duration,
        _ advice: AppleRetryAdvice, attempt: Int, deadline: ContinuousClock.Instant
    ) -> RetryStep {
        recordLatency(endpoint, latency)
        let callOutcome = Self.callOutcome(advice)
        gate.report(permit, callOutcome)
        Counter(
            label: MetricNames.appleCalls,
            dimensions: [("endpoint", endpoint.name), ("status", Self.statusLabel(advice.reason))]
        ).increment()
        let problem = advice.reason.description
        var random = SystemRandomNumberGenerator()
        let remaining = ContinuousClock.now.duration(to: deadline)
        switch retryPolicy.decide(
            attempt: attempt, outcome: callOutcome, remainingUntilDeadline: remaining, using: &random)
        {
        case .stop(let reason):
            return .stop(reason: "\(reason.rawValue) after \(problem)")
        case .retry(let delay):
            logger.debug(
                "apple: retrying", metadata: [LogKeys.endpoint: "\(endpoint.name)", LogKeys.attempt: "\(attempt)"])
            return .retry(after: delay, problem: problem)
        }
    }

    /// How the gate should count a retryable answer: overload signals slow it down, other failures count as errors.
    static func callOutcome(_ advice: AppleRetryAdvice) -> CallOutcome {
        switch advice.reason {
        case .receiptStatus(21005), .httpStatus(503), .httpStatus(429):
            .throttled(retryAfter: advice.retryAfter)
        case .transport(let code) where code == .timeout:
            .timeout
        default:
            .failure
        }
    }

    /// The label of an answer Apple gave that refuses the call: the verifyReceipt status (`21004`…), `ok` for 0.
    public static func verifyReceiptStatusLabel(_ code: Int) -> String { code == 0 ? "ok" : String(code) }

    /// The label of the Server API's refusal of the worker's key (HTTP 401 in both environments), in the form of
    /// ``statusLabel(_:)``'s HTTP statuses.
    public static let keyRefusedLabel = "http_401"

    /// A low-cardinality status label: the verifyReceipt status, the HTTP status, the API error or the transport
    /// failure kind.
    static func statusLabel(_ reason: AppleRetryAdvice.Reason) -> String {
        switch reason {
        case .receiptStatus(let status): String(status)
        case .apiErrorCode(let code): String(code)
        case .httpStatus(let status): "http_\(status)"
        case .transport(let code): "transport_\(code)"
        }
    }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64` (for swift-metrics timers).
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds > 0 ? .max : .min }
        return product.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}

/// An answer from Apple in a box: a job waiting for a call permit keeps one pointer to it in its async frames
/// instead of a slot for the whole answer in each (verifyReceipt's response is a large struct).
public final class AppleAnswerBox<Value: Sendable>: Sendable {
    public let value: Value

    public init(_ value: Value) { self.value = value }
}

extension AppleOutcome {
    /// The same outcome with the answer boxed (see ``AppleAnswerBox``).
    func boxed() -> AppleOutcome<AppleAnswerBox<Answer>> {
        switch self {
        case .answered(let answer): .answered(AppleAnswerBox(answer))
        case .retryable(let advice): .retryable(advice)
        case .failed(let error): .failed(error)
        }
    }
}
