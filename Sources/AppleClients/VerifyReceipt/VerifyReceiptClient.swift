import Foundation
import Logging
import Messages
import Observability
import StoreHTTP

/// Apple's legacy `verifyReceipt` endpoint: one logical verification per call, environment hop included.
///
/// Production is asked first; 21007 repeats the request at sandbox and 21008 at production (one hop at most),
/// 21002 is repeated once at once (Apple uses it for temporary issues too). Everything else that is temporary
/// comes back as ``AppleOutcome/retryable(_:)`` for the caller's rate limiter to schedule.
public struct VerifyReceiptClient: Sendable {
    private let transport: any HTTPTransport
    private let configuration: VerifyReceiptConfiguration
    private let logger: Logger
    private let now: @Sendable () -> Date

    /// Creates a client. `now` is only used to read HTTP-date `Retry-After` headers.
    public init(
        transport: any HTTPTransport, configuration: VerifyReceiptConfiguration, logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
        self.now = now
    }

    /// Verifies a base64 receipt (an app receipt or an iOS 6 transaction receipt).
    ///
    /// Throws only `CancellationError`; every other failure is an ``AppleOutcome``.
    public func verify(
        receiptData: String, startingAt firstEnvironment: AppleEnvironment = .production
    ) async throws -> AppleOutcome<VerifyReceiptResponse> {
        var environment = firstEnvironment
        var hopped = false
        var repeatedMalformed = false
        let body = requestBody(receiptData: receiptData)
        while true {
            let outcome = try await send(body, to: environment)
            guard case .answered(let response) = outcome else { return outcome }
            switch response.status {
            case .sandboxReceiptSentToProduction where !hopped && environment == .production:
                hopped = true
                environment = .sandbox
                logger.debug(
                    "verifyReceipt: sandbox receipt, asking sandbox", metadata: Self.metadata(environment, response))
            case .productionReceiptSentToSandbox where !hopped && environment == .sandbox:
                hopped = true
                environment = .production
                logger.debug(
                    "verifyReceipt: production receipt, asking production",
                    metadata: Self.metadata(environment, response))
            case .malformedReceiptData where !repeatedMalformed:
                repeatedMalformed = true
                logger.debug("verifyReceipt: 21002, repeating once", metadata: Self.metadata(environment, response))
            case .serverUnavailable, .internalDataAccessError:
                return .retryable(
                    AppleRetryAdvice(reason: .receiptStatus(response.status.code), environment: environment))
            case .internalError(let code):
                // Apple: `is-retryable` 1 means a temporary issue; absent is taken as temporary too.
                if response.isRetryable ?? true {
                    return .retryable(AppleRetryAdvice(reason: .receiptStatus(code), environment: environment))
                }
                return .answered(response)
            default:
                logger.debug(
                    "verifyReceipt: answered", metadata: Self.metadata(environment, response, receiptEnvironment: true))
                return .answered(response)
            }
        }
    }

    /// Log metadata of an answer; called only inside `logger.debug`'s autoclosure, so it costs nothing (no
    /// dictionary, no strings) unless debug logging is on.
    private static func metadata(
        _ environment: AppleEnvironment, _ response: VerifyReceiptResponse, receiptEnvironment: Bool = false
    ) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            LogKeys.appleEnvironment: "\(environment.rawValue)", LogKeys.appleStatus: "\(response.status.code)",
        ]
        if receiptEnvironment { metadata[LogKeys.appleReceiptEnvironment] = "\(response.environment.rawValue)" }
        return metadata
    }

    /// One POST to one environment, mapped to an outcome (an answered status may still need a hop).
    private func send(
        _ body: [UInt8], to environment: AppleEnvironment
    ) async throws -> AppleOutcome<
        VerifyReceiptResponse
    > {
        let request = TransportRequest(
            method: .post, url: configuration.url(for: environment), headers: Self.headers, body: body,
            timeout: configuration.requestTimeout)
        let response: TransportResponse
        switch try await transport.exchange(request, environment: environment, logger: logger, label: "verifyReceipt") {
        case .success(let answer): response = answer
        case .failure(let failure): return failure.result()
        }
        // (CancellationError and any other error propagate.)
        switch response.status {
        case 200:
            do {
                return .answered(try VerifyReceiptResponse.parse(response.body, answeredBy: environment))
            } catch let error as AppleClientError {
                return .failed(error)
            }
        case 408, 429, 500...599:
            let retryAfter = RetryAfter.fromHTTPHeader(response.header("Retry-After"), now: now())
            return .retryable(
                AppleRetryAdvice(reason: .httpStatus(response.status), retryAfter: retryAfter, environment: environment)
            )
        default:
            return .failed(
                AppleClientError(
                    code: .httpStatus, detail: "verifyReceipt answered HTTP \(response.status)",
                    httpStatus: response.status))
        }
    }

    /// The same on every request (one array, not one per call).
    private static let headers: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Accept", "application/json"),
    ]

    /// The JSON body `{"receipt-data": …, "password": …, "exclude-old-transactions": …}`, written directly: it is
    /// built once per verification, and `JSONEncoder` cost more than the rest of the request on the client side.
    private func requestBody(receiptData: String) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(receiptData.utf8.count + 128)
        body.append(contentsOf: #"{"receipt-data":"#.utf8)
        Self.appendJSONString(receiptData, to: &body)
        if let password = configuration.sharedSecret?.value {
            body.append(contentsOf: #","password":"#.utf8)
            Self.appendJSONString(password, to: &body)
        }
        body.append(contentsOf: #","exclude-old-transactions":"#.utf8)
        body.append(contentsOf: (configuration.excludeOldTransactions ? "true" : "false").utf8)
        body.append(UInt8(ascii: "}"))
        return body
    }

    /// Appends `text` as a JSON string literal: quotes, backslashes and control characters escaped, everything
    /// else (slashes and non-ASCII UTF-8 included) as is.
    static func appendJSONString(_ text: String, to body: inout [UInt8]) {
        body.append(UInt8(ascii: "\""))
        // Base64 receipts never need escaping: then the text is copied in one piece (the byte loop below cost
        // 6 % of a benchmark's CPU samples).
        let copiedWhole: Bool? = text.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                return false
            }
            body.append(contentsOf: bytes)
            return true
        }
        if copiedWhole == true {
            body.append(UInt8(ascii: "\""))
            return
        }
        let hexDigits = Array("0123456789abcdef".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                body.append(UInt8(ascii: "\\"))
                body.append(byte)
            case 0x0A:
                body.append(contentsOf: #"\n"#.utf8)
            case 0x0D:
                body.append(contentsOf: #"\r"#.utf8)
            case 0x09:
                body.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                body.append(contentsOf: #"\u00"#.utf8)
                body.append(hexDigits[Int(byte >> 4)])
                body.append(hexDigits[Int(byte & 0x0F)])
            default:
                body.append(byte)
            }
        }
        body.append(UInt8(ascii: "\""))
    }
}
