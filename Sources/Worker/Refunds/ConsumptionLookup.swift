import Decision
import Foundation
import Logging
import Messages
import Metrics
import Observability
import StoreHTTP

/// Settings of ``ConsumptionLookup``.
public struct ConsumptionLookupConfiguration: Sendable {
    /// The lookup's URL (`consumption_lookup_url`): https://, or http:// to loopback, as the configuration checks.
    public var url: String
    /// Sent as `Authorization: Bearer <token>` (`consumption_lookup_token_file`); nil sends no Authorization.
    public var token: String?
    /// How long one lookup may take (`consumption_lookup_timeout_ms`). Default: 2 seconds.
    public var timeout: Duration

    public init(url: String, token: String? = nil, timeout: Duration = .milliseconds(2000)) {
        self.url = url
        self.token = token
        self.timeout = timeout
    }
}

/// The operator's consumption lookup: asked, when a refund answer is built, how many units of a one-time product
/// (coins, credits) the customer consumed. Only the operator's backend knows usage, and refund questions are rare
/// while usage events are many, so the worker pulls the figure at answer time rather than being told of each use.
///
/// `GET <url>?store=app_store|google_play&app=..&product_id=..&transaction_id=..&account_id=..` (each value
/// percent-encoded; `app` and `account_id` only when known), answered 200 with
/// `{"units_consumed": 3, "units_purchased": 10}` (`units_purchased` optional; both whole numbers from 0, consumed at
/// most purchased). 404: the backend does not know. Anything else that is not a usable answer is ``Outcome/invalid``
/// (logged without its body, counted); a timeout, a connection that fails, 5xx and 429 are ``Outcome/failed``: the
/// caller puts its answer back for a retry. TLS is verified by the transport, always.
public struct ConsumptionLookup: Sendable {
    /// What the lookup is asked about.
    public struct Question: Sendable, Hashable {
        public var store: Store
        /// The bundle id or package name; nil when not known (not sent).
        public var app: String?
        public var productID: String
        public var transactionID: String
        /// The owner as the ledger knows it; nil when nobody holds the purchase (not sent).
        public var accountID: String?

        public init(store: Store, app: String?, productID: String, transactionID: String, accountID: String?) {
            self.store = store
            self.app = app
            self.productID = productID
            self.transactionID = transactionID
            self.accountID = accountID
        }
    }

    /// How a lookup ended.
    public enum Outcome: Sendable, Hashable {
        /// The backend's figures.
        case found(consumed: Int, purchased: Int?)
        /// 404: the backend does not know this purchase's usage.
        case unknown
        /// An answer that cannot be used (malformed, out of range, an unexpected status); usage stays unknown.
        case invalid(String)
        /// A failure that may pass (timeout, no connection, 5xx, 429): worth asking again later.
        case failed(String)

        /// The metric's `result` label.
        public var result: String {
            switch self {
            case .found: "found"
            case .unknown: "unknown"
            case .invalid: "invalid"
            case .failed: "failed"
            }
        }

        /// How `refund-policy explain` shows it: `found`, `unknown`, `invalid: ...` or `lookup failed: ...`.
        public var summary: String {
            switch self {
            case .found: "found"
            case .unknown: "unknown"
            case .invalid(let reason): "invalid: \(reason)"
            case .failed(let reason): "lookup failed: \(reason)"
            }
        }
    }

    private let transport: any HTTPTransport
    private let configuration: ConsumptionLookupConfiguration
    private let logger: Logger

    public init(transport: any HTTPTransport, configuration: ConsumptionLookupConfiguration, logger: Logger) {
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
    }

    /// Asks the backend; counted in `verify_consumption_lookups_total{result}`, and logged unless found or unknown.
    public func units(for question: Question) async -> Outcome {
        let outcome = await ask(question)
        Counter(label: MetricNames.consumptionLookups, dimensions: [("result", outcome.result)]).increment()
        switch outcome {
        case .found, .unknown:
            break
        case .invalid(let reason), .failed(let reason):
            // The reason names a status or a fault of the answer, never its body; the token is never in it.
            logger.warning(
                "consumption lookup: \(outcome.result)",
                metadata: [LogKeys.transactionID: "\(question.transactionID)", LogKeys.reason: "\(reason)"])
        }
        return outcome
    }

    private func ask(_ question: Question) async -> Outcome {
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let token = configuration.token { headers.append(("Authorization", "Bearer \(token)")) }
        let response: TransportResponse
        do {
            response = try await transport.execute(
                TransportRequest(
                    method: .get, url: Self.url(configuration.url, question), headers: headers,
                    timeout: configuration.timeout))
        } catch let error as HTTPTransportError {
            if error.code == .responseTooLarge { return .invalid("answer too large") }
            return .failed(error.code.description)
        } catch {
            return .failed("cancelled")
        }
        return Self.outcome(status: response.status, body: response.body)
    }

    /// The request's URL: `base` with the question's fields added to its query.
    static func url(_ base: String, _ question: Question) -> String {
        var fields: [(String, String?)] = [
            ("store", question.store.rawValue), ("app", question.app), ("product_id", question.productID),
            ("transaction_id", question.transactionID), ("account_id", question.accountID),
        ]
        fields.removeAll { $0.1 == nil }
        let query = fields.map { "\($0.0)=\(($0.1 ?? "").percentEncodedUnreserved)" }.joined(separator: "&")
        return base + (base.contains("?") ? "&" : "?") + query
    }

    /// What an answer says.
    static func outcome(status: Int, body: [UInt8]) -> Outcome {
        switch status {
        case 200: break
        case 404: return .unknown
        case 429, 500...599: return .failed("HTTP \(status)")
        default: return .invalid("HTTP \(status)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            return .invalid("not a JSON object")
        }
        guard let consumed = units(object["units_consumed"]) else {
            return .invalid("units_consumed must be a whole number from 0")
        }
        var purchased: Int?
        if let value = object["units_purchased"], !(value is NSNull) {
            guard let units = units(value) else { return .invalid("units_purchased must be a whole number from 0") }
            guard consumed <= units else { return .invalid("units_consumed is above units_purchased") }
            purchased = units
        }
        return .found(consumed: consumed, purchased: purchased)
    }

    /// A JSON whole number from 0 (never a boolean, a fraction or a string).
    static func units(_ value: Any?) -> Int? {
        guard let number = value as? NSNumber, !number.isJSONBoolean else { return nil }
        let double = number.doubleValue
        guard double.isFinite, double >= 0, double.rounded() == double, double < 1e15 else { return nil }
        return Int(double)
    }
}

extension ConsumptionLookup {
    /// Asks `lookup` about the purchase of `facts` when it is a one-time product, and records the units it reports
    /// in the facts (``RefundFacts/recordUnits(consumed:purchased:)``). Nil when nothing was asked: no lookup is set,
    /// or the product is not a one-time product (a subscription's share used is its period's).
    static func consult(
        _ lookup: ConsumptionLookup?, facts: inout RefundFacts, transactionID: String, accountID: String?
    ) async -> Outcome? {
        guard let lookup, facts.isOneTimeProduct else { return nil }
        let outcome = await lookup.units(
            for: Question(
                store: facts.store, app: facts.app, productID: facts.productID, transactionID: transactionID,
                accountID: accountID))
        if case .found(let consumed, let purchased) = outcome {
            facts.recordUnits(consumed: consumed, purchased: purchased)
        }
        return outcome
    }
}
