import Foundation
import Messages

/// One line of an account's timeline: a verdict read (and what it did), a lifecycle event it caused, or a message
/// that was ignored because it could not be understood. Newest first in the API; ``sequence`` orders them.
public struct HistoryEntry: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A verdict, with its ``effect``.
        case verdict
        /// A lifecycle event (``event``).
        case event
        /// A message that was not applied: unknown schema, unknown outcome, unreadable fields.
        case ignored
    }

    /// What a verdict did to the account.
    public enum Effect: String, Sendable, Hashable, Codable {
        /// It changed transactions or counts.
        case applied
        /// It was read and needed nothing (a rejection, `already_granted` with nothing new).
        case noChange = "no_change"
        /// Every transaction it carried had a newer verdict applied already (read out of order).
        case stale
        /// Not understood; see ``HistoryEntry/problem``.
        case ignored
    }

    /// The store's order of entries (assigned when written; 0 before).
    public var sequence: Int64 = 0
    public var accountID: String
    public var kind: Kind
    /// When the projection recorded it.
    public var recordedAt: Date
    /// When it happened: the verdict's `decided_at`, or the event's time.
    public var occurredAt: Date?
    public var verdictID: String?
    public var jobID: String?
    public var outcome: String?
    public var reason: String?
    public var decidedBy: String?
    /// A verdict's `store` (absent from entries recorded before the field: the App Store's).
    public var store: Store?
    public var environment: String?
    public var effect: Effect?
    /// Why a message was ignored, as a code and a sentence (never a value of the message).
    public var problem: String?
    /// The verdict's transactions (ids, product, dates, Google Play's order id; a purchase token is not kept here).
    public var transactions: [Verdict.Transaction] = []
    /// What this verdict did, transaction by transaction, in words ("granted 2000000123", "kept: owned by another").
    public var notes: [String] = []
    public var event: LifecycleEvent?
    /// How the store revoked the verdict's transactions, where the verdict says (nil: it says nothing).
    public var revocations: [TransactionRevocation]?

    /// A verdict that granted nothing and changed nothing (rejected or unverifiable, and not a refund or an expiry
    /// it applied), or a message that was ignored: the entries an account keeps only the newest of
    /// (``ProjectionBatch/rejectionsPerAccount``).
    public var isRejection: Bool {
        switch kind {
        case .ignored: return true
        case .event: return false
        case .verdict: return outcome != "granted" && outcome != "already_granted" && effect != .applied
        }
    }

    enum CodingKeys: String, CodingKey {
        case sequence
        case accountID = "account_id"
        case kind
        case recordedAt = "recorded_at"
        case occurredAt = "occurred_at"
        case verdictID = "verdict_id"
        case jobID = "job_id"
        case outcome, reason
        case decidedBy = "decided_by"
        case store
        case environment, effect, problem, transactions, notes, event, revocations
    }
}

/// What the projection reads: a verdict (with how its transactions were revoked, when it says), or a message on the
/// verdicts topic it cannot take as one.
public enum ProjectionInput: Sendable {
    case verdict(Verdict, revocations: [TransactionRevocation] = [])
    case unreadable(UnreadableMessage)
}

/// How a store revoked one of a verdict's transactions, as the verdict's optional per-transaction fields state it:
/// `revocation_type` (`REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE`), `revocation_percentage` (of the price
/// refunded, in thousandths of a percent: 40000 is 40 %) and `revocation_reason` (Apple's code). Read from the
/// verdict's JSON by ``VerdictReader``, so a verdict without them, or from a build that does not write them, reads
/// as before.
public struct TransactionRevocation: Sendable, Hashable, Codable {
    public var transactionID: String
    public var type: String?
    public var percentage: Int?
    public var reason: String?

    public static let refundFull = "REFUND_FULL"
    public static let refundProrated = "REFUND_PRORATED"
    public static let familyRevoke = "FAMILY_REVOKE"

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case type = "revocation_type"
        case percentage = "revocation_percentage"
        case reason = "revocation_reason"
    }
}

/// A message of the verdicts topic that is not a verdict this build understands, with whatever could be read of
/// its envelope, so that the ignoring lands in the right account's history.
public struct UnreadableMessage: Sendable, Hashable {
    /// An id to de-duplicate on: the `verdict_id` when readable, else the message's place in the topic.
    public var dedupeID: String
    /// The account, when the message names a valid one.
    public var accountID: String?
    public var verdictID: String?
    public var schema: String?
    public var outcome: String?
    /// A code (`unsupported_schema`, `unknown_outcome`, `invalid_field`, `not_json`, `oversized`) and a sentence.
    public var code: String
    public var problem: String
}
