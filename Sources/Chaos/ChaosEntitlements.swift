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
        var products: [String: (product: String, quantity: Int)] = [:]
        for verdict in verdicts {
            for transaction in verdict.transactions {
                products[transaction.transactionID] = (transaction.productID, max(1, transaction.quantity ?? 1))
            }
        }
        for job in jobs where Identifier.isValid(job.accountID) {
            accounts[job.accountID, default: Account()] = accounts[job.accountID] ?? Account()
        }
        let grantable = Set(jobs.compactMap(\.grantableTransactionID))
        for transactionID in grantable.sorted() {
            guard let claim = claims[transactionID], let (product, quantity) = products[transactionID] else { continue }
            let type = catalog.type(of: product, expiresDate: nil)
            var account = accounts[claim.accountID] ?? Account()
            if type == .consumable {
                account.consumables[product, default: 0] += quantity
            } else {
                account.active.formUnion(catalog.entitlements(of: product, type: type))
            }
            accounts[claim.accountID] = account
        }
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
