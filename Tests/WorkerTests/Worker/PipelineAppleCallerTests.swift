import Logging
import RateLimiter
import Synchronization
import Testing

@testable import AppleClients
@testable import Worker

/// `AppleCaller.call` with its bookkeeping outside its async frame (a small frame per waiting job): the
/// same answers, retries and reasons as before.
@Suite("Pipeline: Apple caller", .timeLimit(.minutes(2)))
struct PipelineAppleCallerTests {
    static func caller(maximumAttempts: Int) -> AppleCaller {
        AppleCaller(
            gate: AppleCallGate(clock: ContinuousClock()),
            retryPolicy: RetryPolicy(
                base: .milliseconds(1), maximumBackoff: .milliseconds(2), maximumAttempts: maximumAttempts),
            logger: Logger(label: "pipeline-apple-caller-test"))
    }

    static var deadline: ContinuousClock.Instant { .now.advanced(by: .seconds(30)) }

    /// Answers `outcomes` in turn, counting the calls.
    final class PipelineScriptedApple: Sendable {
        let outcomes: [AppleOutcome<AppleAnswerBox<Int>>]
        let calls = Atomic(0)

        init(_ outcomes: [AppleOutcome<AppleAnswerBox<Int>>]) { self.outcomes = outcomes }

        func next() -> AppleOutcome<AppleAnswerBox<Int>> {
            let index = calls.add(1, ordering: .relaxed).oldValue
            return outcomes[min(index, outcomes.count - 1)]
        }
    }

    static let serverError = AppleOutcome<AppleAnswerBox<Int>>.retryable(
        AppleRetryAdvice(reason: .httpStatus(500)))

    @Test("an answer is returned at once, boxed")
    func answered() async throws {
        let apple = PipelineScriptedApple([.answered(AppleAnswerBox(7))])
        let result = try await Self.caller(maximumAttempts: 3).call(.verifyReceipt, deadline: Self.deadline) {
            apple.next()
        }
        guard case .answered(let box) = result else {
            Issue.record("expected an answer, got \(result)")
            return
        }
        #expect(box.value == 7)
        #expect(apple.calls.load(ordering: .relaxed) == 1)
    }

    @Test("retryable answers are retried until Apple answers")
    func retriedUntilAnswered() async throws {
        let apple = PipelineScriptedApple([Self.serverError, Self.serverError, .answered(AppleAnswerBox(3))])
        let result = try await Self.caller(maximumAttempts: 5).call(.verifyReceipt, deadline: Self.deadline) {
            apple.next()
        }
        guard case .answered(let box) = result else {
            Issue.record("expected an answer, got \(result)")
            return
        }
        #expect(box.value == 3)
        #expect(apple.calls.load(ordering: .relaxed) == 3)
    }

    @Test("when the attempts run out the reason names the policy's stop and the last problem")
    func attemptsExhausted() async throws {
        let apple = PipelineScriptedApple([Self.serverError])
        let result = try await Self.caller(maximumAttempts: 3).call(.verifyReceipt, deadline: Self.deadline) {
            apple.next()
        }
        guard case .unavailable(let reason) = result else {
            Issue.record("expected unavailable, got \(result)")
            return
        }
        #expect(reason == "attempts_exhausted after HTTP 500")
        #expect(apple.calls.load(ordering: .relaxed) == 3)
    }

    @Test("a failure that retrying cannot fix is not retried")
    func failedForGood() async throws {
        let apple = PipelineScriptedApple([
            .failed(AppleClientError(code: .malformedResponse, detail: "not JSON"))
        ])
        let result = try await Self.caller(maximumAttempts: 3).call(.verifyReceipt, deadline: Self.deadline) {
            apple.next()
        }
        guard case .unavailable(let reason) = result else {
            Issue.record("expected unavailable, got \(result)")
            return
        }
        #expect(reason == AppleClientError.Code.malformedResponse.description)
        #expect(apple.calls.load(ordering: .relaxed) == 1)
    }

    @Test("boxing an outcome keeps its case and its answer")
    func boxedOutcome() {
        guard case .answered(let box) = AppleOutcome<String>.answered("receipt").boxed() else {
            Issue.record("the answer was lost")
            return
        }
        #expect(box.value == "receipt")
        let retryable = AppleOutcome<String>.retryable(AppleRetryAdvice(reason: .httpStatus(503)))
        guard case .retryable(let advice) = retryable.boxed() else {
            Issue.record("the advice was lost")
            return
        }
        #expect(advice.reason.description == "HTTP 503")
    }
}
