/// The `status` of a verifyReceipt answer, with what each value means for the caller.
public enum VerifyReceiptStatus: Sendable, Hashable, CustomStringConvertible {
    /// 0: the receipt is valid.
    case valid
    /// 21000: the request to the App Store was not an HTTP POST (a bug on our side).
    case requestNotPost
    /// 21002: the receipt data was malformed, or Apple had a temporary issue.
    case malformedReceiptData
    /// 21003: the receipt could not be authenticated.
    case receiptNotAuthenticated
    /// 21004: the shared secret does not match the account's.
    case sharedSecretMismatch
    /// 21005: the receipt server is temporarily unavailable.
    case serverUnavailable
    /// 21006: valid, but the subscription has expired; the body is still returned and used.
    case subscriptionExpired
    /// 21007: a sandbox receipt was sent to production.
    case sandboxReceiptSentToProduction
    /// 21008: a production receipt was sent to sandbox.
    case productionReceiptSentToSandbox
    /// 21009: internal data access error.
    case internalDataAccessError
    /// 21010: the user account cannot be found or was deleted.
    case accountNotFound
    /// 21100–21199: internal errors; the body's `is-retryable` says whether to retry.
    case internalError(Int)
    /// Any other value.
    case unknown(Int)

    /// Maps Apple's number.
    public init(code: Int) {
        switch code {
        case 0: self = .valid
        case 21000: self = .requestNotPost
        case 21002: self = .malformedReceiptData
        case 21003: self = .receiptNotAuthenticated
        case 21004: self = .sharedSecretMismatch
        case 21005: self = .serverUnavailable
        case 21006: self = .subscriptionExpired
        case 21007: self = .sandboxReceiptSentToProduction
        case 21008: self = .productionReceiptSentToSandbox
        case 21009: self = .internalDataAccessError
        case 21010: self = .accountNotFound
        case 21100...21199: self = .internalError(code)
        default: self = .unknown(code)
        }
    }

    /// Apple's number.
    public var code: Int {
        switch self {
        case .valid: 0
        case .requestNotPost: 21000
        case .malformedReceiptData: 21002
        case .receiptNotAuthenticated: 21003
        case .sharedSecretMismatch: 21004
        case .serverUnavailable: 21005
        case .subscriptionExpired: 21006
        case .sandboxReceiptSentToProduction: 21007
        case .productionReceiptSentToSandbox: 21008
        case .internalDataAccessError: 21009
        case .accountNotFound: 21010
        case .internalError(let code), .unknown(let code): code
        }
    }

    /// Whether Apple vouches for the receipt (0 and 21006): the body holds its contents.
    public var isAuthentic: Bool { self == .valid || self == .subscriptionExpired }

    public var description: String { String(code) }
}
