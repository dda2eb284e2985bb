import Logging
import Messages
import Observability
import StoreHTTP

/// A transport failure on the way to Apple, already classified: retry later (with advice) or give up.
struct AppleTransportFailure: Error {
    let outcome: Outcome

    enum Outcome {
        case retryable(AppleRetryAdvice)
        case failed(AppleClientError)
    }

    /// The failure as the result of a call.
    func result<Answer>() -> AppleOutcome<Answer> {
        switch outcome {
        case .retryable(let advice): .retryable(advice)
        case .failed(let error): .failed(error)
        }
    }
}

extension HTTPTransport {
    /// Sends one request to Apple. A transport failure is logged (without the request) and classified once, here,
    /// for every client; cancellation propagates.
    func exchange(
        _ request: TransportRequest, environment: AppleEnvironment, logger: Logger, label: String
    ) async throws -> Result<TransportResponse, AppleTransportFailure> {
        do {
            return .success(try await execute(request))
        } catch let error as HTTPTransportError {
            logger.debug(
                "\(label): transport failure",
                metadata: [LogKeys.appleEnvironment: "\(environment.rawValue)", LogKeys.error: "\(error)"])
            if error.isRetryable {
                let advice = AppleRetryAdvice(reason: .transport(error.code), environment: environment)
                return .failure(AppleTransportFailure(outcome: .retryable(advice)))
            }
            return .failure(
                AppleTransportFailure(outcome: .failed(AppleClientError(code: .transport, detail: error.description))))
        }
    }
}
