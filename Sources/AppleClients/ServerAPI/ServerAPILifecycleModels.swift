import Foundation
import Messages

/// The body of Send Consumption Information V2 (`ConsumptionRequest`): what the developer knows about a purchase
/// whose refund the customer asked for.
public struct ConsumptionInformation: Sendable, Hashable, Encodable {
    /// `deliveryStatus`: whether the app delivered a working purchase.
    public enum DeliveryStatus: String, Sendable, Hashable, Encodable, CaseIterable {
        case delivered = "DELIVERED"
        case undeliveredQualityIssue = "UNDELIVERED_QUALITY_ISSUE"
        case undeliveredWrongItem = "UNDELIVERED_WRONG_ITEM"
        case undeliveredServerOutage = "UNDELIVERED_SERVER_OUTAGE"
        case undeliveredOther = "UNDELIVERED_OTHER"
    }

    /// `refundPreference`: the developer's wish about the refund.
    public enum RefundPreference: String, Sendable, Hashable, Encodable, CaseIterable {
        case decline = "DECLINE"
        case grantFull = "GRANT_FULL"
        case grantProrated = "GRANT_PRORATED"
    }

    /// Apple refuses the call (400, `InvalidCustomerConsentError`) unless this is true.
    public var customerConsented: Bool
    public var deliveryStatus: DeliveryStatus
    /// Whether a free sample, trial or description of the content was given before the purchase.
    public var sampleContentProvided: Bool
    public var refundPreference: RefundPreference?
    /// How much was consumed, in milliunits of a percent as Apple counts it (0…100,000); omitted when nil.
    public var consumptionPercentage: Int?

    public init(
        customerConsented: Bool, deliveryStatus: DeliveryStatus, sampleContentProvided: Bool,
        refundPreference: RefundPreference? = nil, consumptionPercentage: Int? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.refundPreference = refundPreference
        self.consumptionPercentage = consumptionPercentage
    }
}

/// The body of Get Notification History (`NotificationHistoryRequest`). Apple keeps 180 days of history.
public struct NotificationHistoryQuery: Sendable, Hashable {
    /// The window's start (inclusive) and end (exclusive).
    public var startDate: Date
    public var endDate: Date
    /// Only notifications Apple failed to deliver (every attempt failed, or the last one did).
    public var onlyFailures: Bool
    public var notificationType: String?
    public var notificationSubtype: String?
    /// Only the notifications about this transaction (any transaction id of the purchase).
    public var transactionID: String?

    public init(
        startDate: Date, endDate: Date, onlyFailures: Bool = false, notificationType: String? = nil,
        notificationSubtype: String? = nil, transactionID: String? = nil
    ) {
        self.startDate = startDate
        self.endDate = endDate
        self.onlyFailures = onlyFailures
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
        self.transactionID = transactionID
    }

    /// The JSON body: dates as UNIX milliseconds, absent fields omitted.
    var body: [UInt8] {
        var members: [String: Any] = [
            "startDate": startDate.epochMilliseconds,
            "endDate": endDate.epochMilliseconds,
        ]
        if onlyFailures { members["onlyFailures"] = true }
        if let notificationType { members["notificationType"] = notificationType }
        if let notificationSubtype { members["notificationSubtype"] = notificationSubtype }
        if let transactionID { members["transactionId"] = transactionID }
        // Only strings, integers and booleans: serialization cannot fail.
        return Array((try? JSONSerialization.data(withJSONObject: members, options: [.sortedKeys])) ?? Data("{}".utf8))
    }
}

/// One attempt of Apple to deliver a notification (`sendAttemptItem`).
public struct NotificationSendAttempt: Sendable, Hashable {
    public var attemptDate: Date?
    /// `SUCCESS`, `TIMED_OUT`, `TLS_ISSUE`, `CIRCULAR_REDIRECT`, `NO_RESPONSE`, `SOCKET_ISSUE`,
    /// `UNSUPPORTED_CHARSET`, `INVALID_RESPONSE`, `PREMATURE_CLOSE`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`, `OTHER`.
    public var result: String?
}

/// One notification of the history: its signed payload (verified, and passed on as Apple sent it) and the
/// delivery attempts.
public struct NotificationHistoryItem: Sendable, Hashable {
    public var signedPayload: String
    public var sendAttempts: [NotificationSendAttempt] = []
}

/// One page of Get Notification History.
public struct NotificationHistoryPage: Sendable {
    public var notifications: [NotificationHistoryItem]
    public var hasMore: Bool
    /// Pass this to get the next page.
    public var paginationToken: String?
    public var answeredBy: AppleEnvironment
}

/// One page of Get Refund History (v2).
public struct RefundHistoryPage: Sendable {
    /// The refunded transactions of this page, verified.
    public var transactions: [SignedTransaction]
    public var revision: String?
    public var hasMore: Bool
    public var answeredBy: AppleEnvironment
}

/// A verified `AppTransaction` (Get App Transaction Info).
public struct AppTransactionInfo: Sendable, Hashable {
    public var appTransactionID: String?
    public var bundleID: String?
    public var appAppleID: Int64?
    public var applicationVersion: String?
    public var originalApplicationVersion: String?
    public var originalPurchaseDate: Date?
    public var originalPlatform: String?
    public var environment: AppleEnvironment?
    public var answeredBy: AppleEnvironment
}

/// An answer without content (Send Consumption Information, Finish Transaction, Set App Account Token).
public struct ServerAPIAcknowledgement: Sendable, Hashable {
    /// The environment whose endpoint accepted the call.
    public var answeredBy: AppleEnvironment
}

/// Get Test Notification Status: the test notification Apple sent, and how its delivery went.
public struct TestNotificationStatus: Sendable, Hashable {
    public var signedPayload: String
    public var sendAttempts: [NotificationSendAttempt] = []
    public var answeredBy: AppleEnvironment
}

/// What an identifier in a path may hold, checked before a request is built (so nothing else reaches a URL).
enum PathIDKind: Sendable {
    /// Transaction ids: digits and letters, at most 64.
    case transaction
    /// Test notification tokens: a UUID, an underscore and a time (letters, digits, `-`, `_`), at most 128.
    case token
    /// A call without an identifier in its path.
    case none

    func accepts(_ id: String) -> Bool {
        switch self {
        case .none: true
        case .transaction:
            !id.isEmpty && id.utf8.count <= 64 && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        case .token:
            !id.isEmpty && id.utf8.count <= 128
                && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        }
    }

    var problem: String {
        switch self {
        case .none: "no identifier expected"
        case .transaction: "the transaction id is not alphanumeric"
        case .token: "the test notification token has unexpected characters"
        }
    }
}

extension NotificationSendAttempt {
    init(json: LenientJSON) {
        attemptDate = json["attemptDate"]?.millisecondsDate
        result = json["sendAttemptResult"]?.stringValue
    }

    /// `sendAttempts` of an item; a non-array is malformed.
    static func list(_ json: LenientJSON?) throws -> [NotificationSendAttempt] {
        switch json {
        case nil: return []
        case .array(let items): return items.map(NotificationSendAttempt.init(json:))
        default: throw malformed("`sendAttempts` is not an array")
        }
    }
}
