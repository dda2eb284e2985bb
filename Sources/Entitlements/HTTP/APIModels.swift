import Foundation
import Messages

/// The JSON bodies of the API (docs/ENTITLEMENTS.md, schemas in docs/schemas/entitlements-*.schema.json).
enum APIModels {
    struct Entitlements: Encodable {
        var accountID: String
        var asOf: Date?
        var entitlements: [Entitlement]
        var consumables: [Consumable]

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case asOf = "as_of"
            case entitlements, consumables
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(accountID, forKey: .accountID)
            try c.encode(asOf, forKey: .asOf)
            try c.encode(entitlements, forKey: .entitlements)
            try c.encode(consumables, forKey: .consumables)
        }
    }

    struct Entitlement: Encodable {
        var id: String
        var active: Bool
        var productID: String
        var expiresAt: Date?
        /// Not in the verdict contract (no auto-renew status is published): always null, see docs/ENTITLEMENTS.md.
        var willRenew: Bool?
        var inGracePeriod: Bool
        var inBillingRetry: Bool
        var originalTransactionID: String
        /// The store of the purchase that speaks for the entitlement.
        var store: String
        var environment: String?
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

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(active, forKey: .active)
            try c.encode(productID, forKey: .productID)
            try c.encode(expiresAt, forKey: .expiresAt)
            try c.encode(willRenew, forKey: .willRenew)
            try c.encode(inGracePeriod, forKey: .inGracePeriod)
            try c.encode(inBillingRetry, forKey: .inBillingRetry)
            try c.encode(originalTransactionID, forKey: .originalTransactionID)
            try c.encode(store, forKey: .store)
            try c.encode(environment, forKey: .environment)
            try c.encode(updatedAt, forKey: .updatedAt)
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
        var orderID: String?
        var purchaseToken: String?
        var state: String
        var entitlements: [String]
        var environment: String?
        var purchaseDate: Date?
        var expiresDate: Date?
        var revokedAt: Date?
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

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(transactionID, forKey: .transactionID)
            try c.encode(originalTransactionID, forKey: .originalTransactionID)
            try c.encode(accountID, forKey: .accountID)
            try c.encode(productID, forKey: .productID)
            try c.encode(productType, forKey: .productType)
            try c.encode(store, forKey: .store)
            try c.encode(orderID, forKey: .orderID)
            try c.encode(purchaseToken, forKey: .purchaseToken)
            try c.encode(state, forKey: .state)
            try c.encode(entitlements, forKey: .entitlements)
            try c.encode(environment, forKey: .environment)
            try c.encode(purchaseDate, forKey: .purchaseDate)
            try c.encode(expiresDate, forKey: .expiresDate)
            try c.encode(revokedAt, forKey: .revokedAt)
            try c.encode(quantity, forKey: .quantity)
            try c.encode(inBillingRetry, forKey: .inBillingRetry)
            try c.encode(inGracePeriod, forKey: .inGracePeriod)
            try c.encode(decidedAt, forKey: .decidedAt)
            try c.encode(verdictID, forKey: .verdictID)
            try c.encode(updatedAt, forKey: .updatedAt)
        }
    }

    struct AccountTransactions: Encodable {
        var accountID: String
        var asOf: Date?
        var transactions: [Transaction]
        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case asOf = "as_of"
            case transactions
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(accountID, forKey: .accountID)
            try c.encode(asOf, forKey: .asOf)
            try c.encode(transactions, forKey: .transactions)
        }
    }

    struct TransactionLookup: Encodable {
        var transactionID: String
        var matchedBy: String
        var accountID: String
        var state: String
        var asOf: Date?
        var transactions: [Transaction]
        enum CodingKeys: String, CodingKey {
            case transactionID = "transaction_id"
            case matchedBy = "matched_by"
            case accountID = "account_id"
            case state
            case asOf = "as_of"
            case transactions
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(transactionID, forKey: .transactionID)
            try c.encode(matchedBy, forKey: .matchedBy)
            try c.encode(accountID, forKey: .accountID)
            try c.encode(state, forKey: .state)
            try c.encode(asOf, forKey: .asOf)
            try c.encode(transactions, forKey: .transactions)
        }
    }

    struct History: Encodable {
        var accountID: String
        var asOf: Date?
        var entries: [Entry]
        var nextBefore: Int64?
        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case asOf = "as_of"
            case entries
            case nextBefore = "next_before"
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(accountID, forKey: .accountID)
            try c.encode(asOf, forKey: .asOf)
            try c.encode(entries, forKey: .entries)
            try c.encode(nextBefore, forKey: .nextBefore)
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
        var asOf: Date?
        enum CodingKeys: String, CodingKey {
            case caller, scopes
            case asOf = "as_of"
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(caller, forKey: .caller)
            try c.encode(scopes, forKey: .scopes)
            try c.encode(asOf, forKey: .asOf)
        }
    }

    struct Failure: Encodable {
        var error: String
        var message: String
    }
}
