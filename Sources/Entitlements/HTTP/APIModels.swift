import Foundation
import Messages

/// The JSON bodies of the API (docs/ENTITLEMENTS.md, schemas in docs/schemas/entitlements-*.schema.json).
///
/// A field's key is its property's name in snake_case (`originalTransactionID` is `original_transaction_id`,
/// ``EntitlementAPI/encoder``). The contract lists every field of these bodies, so an absent value is written as
/// `null` (``Nullable``), never left out as a synthesized `Encodable` would leave out a nil optional.
enum APIModels {
    /// An optional field written as `null` when nil.
    @propertyWrapper
    struct Nullable<Value: Encodable>: Encodable {
        var wrappedValue: Value?

        init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
        }
    }

    struct Entitlements: Encodable {
        var accountID: String
        @Nullable var asOf: Date?
        var entitlements: [Entitlement]
        var consumables: [Consumable]
    }

    struct Entitlement: Encodable {
        var id: String
        var active: Bool
        var productID: String
        @Nullable var expiresAt: Date?
        /// Not in the verdict contract (no auto-renew status is published): always null, see docs/ENTITLEMENTS.md.
        @Nullable var willRenew: Bool?
        var inGracePeriod: Bool
        var inBillingRetry: Bool
        var originalTransactionID: String
        /// The store of the purchase that speaks for the entitlement.
        var store: String
        @Nullable var environment: String?
        var updatedAt: Date

        init(_ summary: EntitlementSummary, at instant: Date) {
            let transaction = summary.representative
            id = summary.entitlementID
            active = summary.active
            productID = transaction.productID
            expiresAt = transaction.expiresDate
            willRenew = nil
            inGracePeriod = summary.inGracePeriod(at: instant)
            inBillingRetry = transaction.inBillingRetry
            originalTransactionID = transaction.originalTransactionID
            store = transaction.store.rawValue
            environment = transaction.environment
            updatedAt = summary.updatedAt
        }
    }

    struct Consumable: Encodable {
        var productID: String
        var count: Int
        var store: String
    }

    struct Transaction: Encodable {
        var transactionID: String
        var originalTransactionID: String
        var accountID: String
        var productID: String
        var productType: String
        var store: String
        /// Google Play's order id and purchase token (a Google Play subscription's original transaction id too).
        @Nullable var orderID: String?
        @Nullable var purchaseToken: String?
        var state: String
        var entitlements: [String]
        @Nullable var environment: String?
        @Nullable var purchaseDate: Date?
        @Nullable var expiresDate: Date?
        @Nullable var revokedAt: Date?
        var quantity: Int
        var inBillingRetry: Bool
        var inGracePeriod: Bool
        var decidedAt: Date
        var verdictID: String
        var updatedAt: Date

        init(_ t: ProjectedTransaction, catalog: Catalog, at instant: Date) {
            transactionID = t.transactionID
            originalTransactionID = t.originalTransactionID
            accountID = t.accountID
            productID = t.productID
            productType = t.productType.rawValue
            store = t.store.rawValue
            orderID = t.orderID
            purchaseToken = t.purchaseToken
            state = t.state(at: instant)
            entitlements = t.entitlements(in: catalog)
            environment = t.environment
            purchaseDate = t.purchaseDate
            expiresDate = t.expiresDate
            revokedAt = t.revokedAt
            quantity = t.quantity
            inBillingRetry = t.inBillingRetry
            inGracePeriod = t.inGracePeriod && t.grants(at: instant)
            decidedAt = t.decidedAt
            verdictID = t.verdictID
            updatedAt = t.updatedAt
        }
    }

    struct AccountTransactions: Encodable {
        var accountID: String
        @Nullable var asOf: Date?
        var transactions: [Transaction]
    }

    struct TransactionLookup: Encodable {
        var transactionID: String
        var matchedBy: String
        var accountID: String
        var state: String
        @Nullable var asOf: Date?
        var transactions: [Transaction]
    }

    struct History: Encodable {
        var accountID: String
        @Nullable var asOf: Date?
        var entries: [Entry]
        @Nullable var nextBefore: Int64?
    }

    /// A history entry with its reason code explained in words (``ReasonText``).
    struct Entry: Encodable {
        var entry: HistoryEntry
        var explanation: String?
        /// A `replayed` verdict whose purchase this store records as another account's.
        var belongsToAnotherAccount = false
        /// That account, for a caller with the `support` scope only.
        var ownerAccountID: String?

        func encode(to encoder: any Encoder) throws {
            try entry.encode(to: encoder)
            var c = encoder.container(keyedBy: ExtraKeys.self)
            try c.encode(explanation, forKey: .explanation)
            if belongsToAnotherAccount {
                try c.encode(true, forKey: .belongsToAnotherAccount)
                try c.encodeIfPresent(ownerAccountID, forKey: .ownerAccountID)
            }
        }
        enum ExtraKeys: String, CodingKey {
            case explanation
            case belongsToAnotherAccount = "belongs_to_another_account"
            case ownerAccountID = "owner_account_id"
        }
    }

    struct Session: Encodable {
        var caller: String
        var scopes: [String]
        @Nullable var asOf: Date?
    }

    struct Failure: Encodable {
        var error: String
        var message: String
    }
}
