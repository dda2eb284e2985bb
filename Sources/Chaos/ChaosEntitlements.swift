import Entitlements
import Foundation
import Messages

/// What a chaos run's entitlement service must show at the end, from the run's truth alone: the transactions the
/// traffic minted as authentic and grantable (never refunded, never expired), owned by the account the ledger gave
/// them to. Each account's active entitlements must be exactly the products of its grantable non-consumables and
/// subscriptions, and its consumable counts the units of its grantable consumables.
public struct ChaosEntitlementTruth: Sendable {
    public struct Account: Sendable, Hashable {
        public var active: Set<String> = []
        public var consumables: [String: Int] = [:]
    }

    public private(set) var accounts: [String: Account] = [:]

    /// - Parameters:
    ///   - jobs: every job submitted (their accounts are all checked; most must show nothing).
    ///   - claims: the ledger's owner of each transaction.
    ///   - verdicts: the verdicts published (for each transaction's product and quantity).
    public init(
        jobs: [ChaosSubmittedJob], claims: [String: ChaosClaim], verdicts: [Verdict], catalog: Catalog
    ) {
        var products: [String: (product: String, quantity: Int, store: Store)] = [:]
        for verdict in verdicts {
            for transaction in verdict.transactions {
                products[transaction.transactionID] = (
                    transaction.productID, max(1, transaction.quantity ?? 1), verdict.store
                )
            }
        }
        for job in jobs where Identifier.isValid(job.accountID) {
            accounts[job.accountID, default: Account()] = accounts[job.accountID] ?? Account()
        }
        let grantable = Set(jobs.compactMap(\.grantableTransactionID))
        for transactionID in grantable.sorted() {
            guard let claim = claims[transactionID], let (product, quantity, store) = products[transactionID] else {
                continue
            }
            let type = Self.type(of: product, in: store, catalog: catalog)
            var account = accounts[claim.accountID] ?? Account()
            if type == .consumable {
                account.consumables[product, default: 0] += quantity
            } else {
                account.active.formUnion(Self.entitlements(of: product, type: type, in: store, catalog: catalog))
            }
            accounts[claim.accountID] = account
        }
    }

    /// The product's type in the verdict's store's list (product ids are each store's own); unlisted, as the
    /// catalog judges a product without an expiry.
    static func type(of product: String, in store: Store, catalog: Catalog) -> ProductType {
        catalog.productType(of: product, in: store) ?? catalog.type(of: product, expiresDate: nil)
    }

    /// The entitlements the product grants in the verdict's store's list (the product's own id when unlisted).
    static func entitlements(of product: String, type: ProductType, in store: Store, catalog: Catalog) -> [String] {
        guard store == .googlePlay else { return catalog.entitlements(of: product, type: type) }
        if type == .consumable { return [] }
        return catalog.playProducts[product]?.entitlements ?? [product]
    }

    /// The differences between the API's answer for `account` and the truth, in words (empty: it agrees).
    public func differences(account: String, active: Set<String>, consumables: [String: Int]) -> String? {
        let expected = accounts[account] ?? Account()
        var problems: [String] = []
        if active != expected.active {
            problems.append(
                "active \(active.sorted()) but the truth is \(expected.active.sorted())")
        }
        if consumables != expected.consumables {
            problems.append("consumables \(consumables) but the truth is \(expected.consumables)")
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }
}
