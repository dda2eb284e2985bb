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
    public var sequence: Int64
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
    public var transactions: [Verdict.Transaction]
    /// What this verdict did, transaction by transaction, in words ("granted 2000000123", "kept: owned by another").
    public var notes: [String]
    public var event: LifecycleEvent?

    public init(
        accountID: String, kind: Kind, recordedAt: Date, occurredAt: Date? = nil, verdictID: String? = nil,
        jobID: String? = nil, outcome: String? = nil, reason: String? = nil, decidedBy: String? = nil,
        store: Store? = nil, environment: String? = nil, effect: Effect? = nil, problem: String? = nil,
        transactions: [Verdict.Transaction] = [], notes: [String] = [], event: LifecycleEvent? = nil
    ) {
        self.sequence = 0
        self.accountID = accountID
        self.kind = kind
        self.recordedAt = recordedAt
        self.occurredAt = occurredAt
        self.verdictID = verdictID
        self.jobID = jobID
        self.outcome = outcome
        self.reason = reason
        self.decidedBy = decidedBy
        self.store = store
        self.environment = environment
        self.effect = effect
        self.problem = problem
        self.transactions = transactions
        self.notes = notes
        self.event = event
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
        case environment, effect, problem, transactions, notes, event
    }
}

/// What the projection reads: a verdict, or a message on the verdicts topic it cannot take as one.
public enum ProjectionInput: Sendable {
    case verdict(Verdict)
    case unreadable(UnreadableMessage)
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
    public var problem: String
    public var code: String

    public init(
        dedupeID: String, accountID: String?, verdictID: String?, schema: String?, outcome: String?, code: String,
        problem: String
    ) {
        self.dedupeID = dedupeID
        self.accountID = accountID
        self.verdictID = verdictID
        self.schema = schema
        self.outcome = outcome
        self.code = code
        self.problem = problem
    }
}
