import Foundation
import Messages

@testable import Decision
@testable import Ledger

/// Builders for the ledger tests: jobs, evidence, claims, at a fixed "now".
enum LedgerFixtures {
    static let now = Date(timeIntervalSince1970: 1_800_000_000.123)
    static let bundle = "com.example.app"
    static let catalog = Catalog(
        bundleIDs: [bundle],
        products: [
            .init(id: "com.example.gems", type: .consumable), .init(id: "com.example.pro", type: .nonConsumable),
            .init(id: "com.example.monthly", type: .autoRenewable), .init(id: "com.example.season", type: .nonRenewing),
        ])

    static func policy(
        now: Date = now, allowSandbox: Bool = false, catalog: Catalog? = catalog
    )
        -> DecisionPolicy
    {
        DecisionPolicy(allowSandbox: allowSandbox, now: now, catalog: catalog)
    }

    static func job(_ jobID: String = "job-1", account: String = "acct-A", expectedProduct: String? = nil) -> ReceiptJob
    {
        ReceiptJob(
            jobID: jobID, accountID: account, proof: .receipt("MIIbase64"), bundleID: bundle,
            expectedProductID: expectedProduct)
    }

    static func notificationJob(_ jobID: String = "notification-1") -> ReceiptJob {
        ReceiptJob(jobID: jobID, accountID: "apple-notifications", proof: .notification("eyJhbGciOi"))
    }

    static func days(_ n: Double) -> Date { now.addingTimeInterval(n * 86_400) }

    static func purchase(
        _ id: String, product: String = "com.example.pro", purchased: Date = days(-10), original: String? = nil,
        expires: Date? = nil, revoked: Date? = nil, grace: Date? = nil, billingRetry: Bool = false
    ) -> PurchaseTransaction {
        PurchaseTransaction(
            transactionID: id, originalTransactionID: original, productID: product, purchaseDate: purchased,
            expiresDate: expires, revokedAt: revoked, gracePeriodExpiresDate: grace, isInBillingRetry: billingRetry)
    }

    static func renewal(
        _ id: String, original: String = "sub-1", purchased: Date, expires: Date, revoked: Date? = nil,
        grace: Date? = nil, billingRetry: Bool = false
    ) -> PurchaseTransaction {
        purchase(
            id, product: "com.example.monthly", purchased: purchased, original: original, expires: expires,
            revoked: revoked, grace: grace, billingRetry: billingRetry)
    }

    static func apple(
        _ transactions: [PurchaseTransaction], environment: AppleEnvironment = .production
    )
        -> PurchaseEvidence
    {
        PurchaseEvidence(
            source: .apple, authenticity: .authentic, environment: environment, bundleID: bundle,
            transactions: transactions, appleStatus: 0)
    }

    static func local(_ transactions: [PurchaseTransaction]) -> PurchaseEvidence {
        PurchaseEvidence(
            source: .prefilter, authenticity: .unknown, environment: .production, bundleID: bundle,
            transactions: transactions)
    }

    static func claim(
        _ transaction: PurchaseTransaction, account: String, job: String = "job-0", type: ProductType? = nil
    ) -> TransactionClaim {
        TransactionClaim(
            transactionID: transaction.transactionID, originalTransactionID: transaction.subscriptionKey,
            accountID: account, productID: transaction.productID,
            productType: type ?? catalog.productType(of: transaction.productID) ?? .nonConsumable, bundleID: bundle,
            environment: "Production", purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
            gracePeriodExpiresDate: transaction.gracePeriodExpiresDate, revokedAt: transaction.revokedAt,
            grantedJobID: job, verdictID: Verdict.legacyVerdictID(jobID: job), createdAt: days(-1), updatedAt: days(-1))
    }

    static func decide(
        _ job: ReceiptJob, _ evidence: PurchaseEvidence, claims: [TransactionClaim] = [], prior: Verdict? = nil,
        policy: DecisionPolicy = policy()
    ) -> DecisionResult {
        DecisionRules.decide(
            DecisionInput(
                job: job, evidence: evidence, snapshot: LedgerSnapshot(priorVerdict: prior, claims: claims),
                policy: policy))
    }

    static func decision(_ result: DecisionResult) -> LedgerDecision? {
        if case .decided(let decision) = result { return decision }
        return nil
    }
}
