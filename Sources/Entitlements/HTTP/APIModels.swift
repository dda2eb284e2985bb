import Foundation
import Messages

/// The JSON bodies of the API (docs/ENTITLEMENTS.md, schemas in docs/schemas/entitlements-*.schema.json).
///
/// The contract lists every field of these bodies, so an absent value is written as `null` (``Nullable``), never left
/// out as a synthesized `Encodable` would leave out a nil optional.
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

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case asOf = "as_of"
            case entitlements, consumables
        }

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

        enum CodingKeys: String, CodingKey {
            case id, active
            case productID = "product_id"
            case expiresAt = "expires_at"
            case willRenew = "will_renew"
            case inGracePeriod = "in_grace_period"
            case inBillingRetry = "in_billing_retry"
            case originalTransactionID = "original_transaction_id"
            case store, environment
            case updatedAt = "updated_at"
        }

    }

    struct Consumable: Encodable {
        var productID: String
        var count: Int
        var store: String
        enum CodingKeys: String, CodingKey {
            case productID = "product_id"
            case count, store
        }
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

        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case originalTransactionID = "original_transaction_id"
            case accountID = "account_id"
            case productID = "product_id"
            case productType = "product_type"
            case store
            case orderID = "order_id"
            case purchaseToken = "purchase_token"
            case state, entitlements, environment
            case purchaseDate = "purchase_date"
            case expiresDate = "expires_date"
            case revokedAt = "revoked_at"
            case quantity
            case inBillingRetry = "in_billing_retry"
            case inGracePeriod = "in_grace_period"
            case decidedAt = "decided_at"
            case verdictID = "verdict_id"
            case updatedAt = "updated_at"
        }

    }

    struct AccountTransactions: Encodable {
        var accountID: String
        @Nullable var asOf: Date?
        var transactions: [Transaction]
        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case asOf = "as_of"
            case transactions
        }
    }

    struct TransactionLookup: Encodable {
        var transactionID: String
        var matchedBy: String
        var accountID: String
        var state: String
        @Nullable var asOf: Date?
        var transactions: [Transaction]
        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case matchedBy = "matched_by"
            case accountID = "account_id"
            case state
            case asOf = "as_of"
            case transactions
        }
    }

    struct History: Encodable {
        var accountID: String
        @Nullable var asOf: Date?
        var entries: [Entry]
        @Nullable var nextBefore: Int64?
        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case asOf = "as_of"
            case entries
            case nextBefore = "next_before"
        }
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
        enum CodingKeys: String, CodingKey {
            case caller, scopes
            case asOf = "as_of"
        }
    }

    struct Failure: Encodable {
        var error: String
        var message: String
    }
}
