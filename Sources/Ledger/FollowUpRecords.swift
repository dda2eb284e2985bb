import CodedErrors
import Foundation

/// The follow-up calls to Apple the cluster must make once and only once, and their state (table
/// `apple_call_records`, schema version 5; docs/LEDGER.md, "Apple call records").
///
/// A worker that wants to make a call first ``claimFollowUp(_:holder:now:lease:)``s it: of all workers and
/// redeliveries, one claims, the others are told it is taken. The claim holds for `lease`; a holder that crashes
/// leaves the record due, and ``claimDueFollowUps(kind:holder:now:lease:limit:)`` hands it to the next worker that
/// sweeps. Every ``Ledger`` has it; every failure is a ``LedgerError``.
public protocol FollowUpRecordStore: Sendable {
    /// Records the call as `pending` and claims it for `holder` until `now + lease`, unless a record exists: then
    /// returns that record's state and claims nothing.
    func claimFollowUp(
        _ call: FollowUpRecord.Call, holder: String, now: Date, lease: Duration
    ) async throws -> FollowUpClaim

    /// Claims up to `limit` pending records of `kind` that are due (their claim expired or their retry time came),
    /// for `holder` until `now + lease`; returns them. Atomic: two sweepers never get the same record.
    func claimDueFollowUps(
        kind: FollowUpRecord.Kind, holder: String, now: Date, lease: Duration, limit: Int
    ) async throws -> [FollowUpRecord.Call]

    /// Ends `holder`'s claim: a final state (`sent`, `notSent`, `failed`), or `pending` again, due at `retryAt`.
    /// `detail` is a short reason safe to show (an error code, never a body). Does nothing when `holder` no longer
    /// holds the claim (it expired and another worker took it).
    func settleFollowUp(
        kind: FollowUpRecord.Kind, key: String, holder: String, state: FollowUpRecord.State, detail: String?,
        retryAt: Date?, now: Date
    ) async throws

    /// The record of one call, if any (operators' tools and tests).
    func followUpRecord(kind: FollowUpRecord.Kind, key: String) async throws -> FollowUpRecord?

    /// When the oldest `pending` record of `kinds` was created, or nil when none is pending: how long a call the
    /// cluster owes has waited, whichever worker holds it and across restarts.
    func oldestPendingFollowUp(kinds: [FollowUpRecord.Kind]) async throws -> Date?
}

/// One follow-up call's record.
public struct FollowUpRecord: Sendable, Hashable {
    /// What the call is.
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Finish Transaction, keyed by the transaction id.
        public static let finishTransaction = Kind(rawValue: "finish_transaction")
        /// Send Consumption Information, keyed by the CONSUMPTION_REQUEST's notification id.
        public static let consumptionInformation = Kind(rawValue: "consumption_information")
        /// Set App Account Token on a granted subscription or purchase that carried none, keyed by its original
        /// transaction id.
        public static let appAccountToken = Kind(rawValue: "app_account_token")
        /// Google Play's acknowledge of a granted purchase (one-time or subscription), keyed by its purchase token:
        /// a subscription's renewals keep the token and need none. `transactionID` holds the token and `environment`
        /// the purchase's place in the Developer API (`GooglePlayFollowUpTarget` in the worker).
        public static let playAcknowledge = Kind(rawValue: "play_acknowledge")
        /// Google Play's consume of a granted consumable (which acknowledges it too), keyed and stored as
        /// ``playAcknowledge``.
        public static let playConsume = Kind(rawValue: "play_consume")
        /// Google Play's answer to a pending refund review (`orders.reviewrefund`), keyed by the review's
        /// `pendingRefundToken` (Google takes one answer per review); `transactionID` holds the order id and
        /// `environment` `{package name}/orders/{product id}`.
        public static let playRefundReview = Kind(rawValue: "play_refund_review")

        public var description: String { rawValue }
    }

    /// Where the call stands.
    public enum State: String, Sendable, Hashable, CaseIterable {
        /// To be made (claimed by a holder, or due for the next sweep).
        case pending
        /// Apple accepted it.
        case sent
        /// Deliberately not made (the operator's policy, e.g. no customer consent).
        case notSent = "not_sent"
        /// Apple refused it for good, or it was retried until the attempt limit.
        case failed
    }

    /// What identifies a call and what it needs to be made again by another worker.
    public struct Call: Sendable, Hashable {
        public var kind: Kind
        /// Unique per kind: the transaction id, or the notification id.
        public var key: String
        public var transactionID: String
        /// The environment the transaction belongs to (`Production`, `Sandbox`), when known.
        public var environment: String?
        /// Attempts made before this claim.
        public var attempts: Int

        public init(kind: Kind, key: String, transactionID: String, environment: String?, attempts: Int = 0) {
            self.kind = kind
            self.key = key
            self.transactionID = transactionID
            self.environment = environment
            self.attempts = attempts
        }
    }

    public var call: Call
    public var state: State
    public var holder: String?
    public var dueAt: Date
    public var detail: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        call: Call, state: State, holder: String?, dueAt: Date, detail: String?, createdAt: Date, updatedAt: Date
    ) {
        self.call = call
        self.state = state
        self.holder = holder
        self.dueAt = dueAt
        self.detail = detail
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// What claiming a call found.
public enum FollowUpClaim: Sendable, Hashable {
    /// This holder makes the call now.
    case claimed
    /// A record exists: another worker or an earlier delivery has it (pending), or it is settled.
    case exists(FollowUpRecord.State)
}
