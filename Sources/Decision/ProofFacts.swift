import Foundation
import Messages

/// What a store adapter read from a proof by itself, before any judging: its kind, the offline signature check,
/// the app, environment and purchases it names. Facts only: ``ProofJudgement`` judges them against the catalog and
/// the environment policy, ``EvidenceMapping`` turns them into evidence.
public struct ProofFacts: Sendable, Hashable {
    /// How far the proof alone can establish what it claims.
    public enum Kind: Sendable, Hashable {
        /// Not a proof at all (cracker strings, truncated data, garbage): why.
        case unreadable(reason: String)
        /// A signed payload that is its own proof (a JWS): if its chain does not reach an anchor, the store cannot
        /// vouch for it either.
        case signedPayload
        /// A signed payload that names no app (a renewal info): no bundle id to check.
        case signedPayloadWithoutApp
        /// A receipt whose current state only the store holds (app receipts, iOS 6 transaction receipts).
        case storeHeld
    }

    /// The offline check of the proof's signature and certificate chain.
    public enum Signature: Sendable, Hashable {
        /// The signature verifies and the chain reaches a configured anchor.
        case valid
        /// The signature or the chain is wrong: altered or forged.
        case invalid(reason: String)
        /// The signature may be right but the chain does not reach a configured anchor.
        case untrusted(reason: String)
        /// Nothing was checked (another app's proof, a chain allowed unanchored, a format without a signature).
        case notChecked(reason: String)
    }

    /// Something the proof's signed data names other than the job's own fields say (Google Play: the job names the
    /// package, product and purchase token beside the signed purchase data).
    public enum Mismatch: Sendable, Hashable {
        /// The signed data is for another app: the package it names.
        case app(String?)
        /// The signed data is for another product: the product it names.
        case product(String?)
        /// The signed data is for another purchase token.
        case purchaseToken
    }

    /// What a signed notification in the proof states.
    public struct Notification: Sendable, Hashable {
        /// The store's notification type and subtype, as the store spells them.
        public var type: String
        public var subtype: String?
        /// The app's store id the notification names, when it names one.
        public var appAppleID: Int64?
        /// Whether the subscription renews, as the renewal info inside the notification states it.
        public var renewalAutoRenews: Bool?

        public init(type: String, subtype: String? = nil, appAppleID: Int64? = nil, renewalAutoRenews: Bool? = nil) {
            self.type = type
            self.subtype = subtype
            self.appAppleID = appAppleID
            self.renewalAutoRenews = renewalAutoRenews
        }
    }

    public var kind: Kind
    /// The store the proof comes from; its apps and products are the catalog's for that store. Default: the App
    /// Store.
    public var store: Store
    public var signature: Signature
    /// The environment the proof names; nil when it names none or one the store does not have.
    public var environment: AppleEnvironment?
    /// An environment name the proof gives that is none of the store's, as written.
    public var unrecognizedEnvironment: String?
    public var bundleID: String?
    /// Every product id the proof names (its purchases' and its renewal info's).
    public var productIDs: [String]
    public var transactions: [PurchaseTransaction]
    public var notification: Notification?
    /// When the proof was signed.
    public var signedDate: Date?
    /// Where the proof's signed data disagrees with the job's own fields; empty when they agree or were not compared.
    public var mismatches: [Mismatch]

    public init(
        kind: Kind, signature: Signature, environment: AppleEnvironment? = nil, unrecognizedEnvironment: String? = nil,
        bundleID: String? = nil, productIDs: [String] = [], transactions: [PurchaseTransaction] = [],
        notification: Notification? = nil, signedDate: Date? = nil, store: Store = .appStore,
        mismatches: [Mismatch] = []
    ) {
        self.kind = kind
        self.store = store
        self.mismatches = mismatches
        self.signature = signature
        self.environment = environment
        self.unrecognizedEnvironment = unrecognizedEnvironment
        self.bundleID = bundleID
        self.productIDs = productIDs
        self.transactions = transactions
        self.notification = notification
        self.signedDate = signedDate
    }
}

/// What a store answered when asked to verify a proof or look up a transaction: facts only, turned into evidence
/// by ``EvidenceMapping/evidence(from:local:)``.
public struct StoreAnswer: Sendable, Hashable {
    /// What the store's answer says about the proof, reduced from the store's own status codes.
    public enum Status: Sendable, Hashable {
        /// The store vouches for the proof; ``StoreAnswer/transactions`` are its purchases.
        case authentic
        /// The store says the proof is not authentic.
        case notAuthenticated
        /// The store could not read the proof.
        case unreadableProof
        /// The store refused the request itself (a wrong shared secret, a request it could not read): about this
        /// deployment, not about the customer's purchase.
        case refusedRequest
        /// Any other refusal.
        case rejected
        /// The store knows no such purchase (Google Play's 404 or 410 for the token).
        case notFound
        /// The purchase awaits payment (Google Play's `PENDING`): the store vouches for nothing yet.
        case pending
    }

    public var status: Status
    /// The store's own status code, recorded with the verdict.
    public var statusCode: Int
    public var environment: AppleEnvironment?
    public var bundleID: String?
    public var transactions: [PurchaseTransaction]

    public init(
        status: Status, statusCode: Int, environment: AppleEnvironment? = nil, bundleID: String? = nil,
        transactions: [PurchaseTransaction] = []
    ) {
        self.status = status
        self.statusCode = statusCode
        self.environment = environment
        self.bundleID = bundleID
        self.transactions = transactions
    }
}
