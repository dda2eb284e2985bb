import Decision
import Foundation
import Messages
import PostgresNIO
import PostgresSettings
import SQLiteStorage

extension SQLiteLedger {
    public func claims(ownedBy accountID: String) async throws -> [TransactionClaim] {
        try await executor.run { connection, _ in
            try connection.query(
                "SELECT \(Self.claimColumns) FROM transaction_claims WHERE account_id = ? ORDER BY transaction_id",
                [.text(accountID)]
            ).map { try Self.claim($0) }
        }
    }
}

extension PostgresLedger {
    public func claims(ownedBy accountID: String) async throws -> [TransactionClaim] {
        try await operation("claims of an account") { pool, logger in
            try await pool.withConnection { connection in
                var claims: [TransactionClaim] = []
                for try await row in try await connection.query(
                    """
                    SELECT \(unescaped: Self.claimColumns) FROM transaction_claims
                    WHERE account_id = \(accountID) ORDER BY transaction_id
                    """, logger: logger)
                {
                    claims.append(try Self.claim(row.makeRandomAccess(), offset: 0))
                }
                return claims
            }
        }
    }
}

/// `verify-worker ledger show`: what the ledger holds about a transaction or an account, as JSON.
public enum LedgerShow {
    /// What to look up.
    public enum Subject: Sendable, Hashable {
        /// A transaction, or the transactions of a subscription when the id is an original transaction id.
        case transaction(String)
        case account(String)
    }

    /// The JSON document: `{"transactions": [...]}`, each with its state at `now` and the verdict that granted it.
    public static func report(_ subject: Subject, ledger: any Ledger, now: Date = Date()) async throws -> [String: Any]
    {
        let claims: [TransactionClaim]
        switch subject {
        case .transaction(let id):
            claims = try await ledger.snapshot(jobID: "", transactionIDs: [id], originalTransactionIDs: [id]).claims
        case .account(let id):
            claims = try await ledger.claims(ownedBy: id)
        }
        let codec = MessageCodec()
        // Every claim of the subscriptions shown, for the subscription's state.
        let originals = Set(claims.filter { $0.productType == .autoRenewable }.map(\.originalTransactionID))
        // A family member's claims and the purchaser's are separate subscriptions, even under one original id.
        var family = Dictionary(grouping: claims, by: Self.subscriptionKey)
        if !originals.isEmpty {
            let all = try await ledger.snapshot(
                jobID: "", transactionIDs: [], originalTransactionIDs: originals.sorted()
            ).claims
            for (original, members) in Dictionary(grouping: all, by: Self.subscriptionKey) {
                var byID = Dictionary(family[original, default: []].map { ($0.transactionID, $0) }) { a, _ in a }
                for member in members { byID[member.transactionID] = member }
                family[original] = Array(byID.values)
            }
        }
        var transactions: [[String: Any]] = []
        for claim in claims.sorted(by: { $0.transactionID < $1.transactionID }) {
            let subscriptionState = subscriptionState(of: family[Self.subscriptionKey(claim)] ?? [claim], at: now)
            var verdicts: [Any] = []
            if let verdict = try await ledger.snapshot(
                jobID: claim.grantedJobID, transactionIDs: [], originalTransactionIDs: []
            ).priorVerdict,
                let object = try? JSONSerialization.jsonObject(with: Data(codec.encode(verdict)))
            {
                verdicts.append(object)
            }
            transactions.append([
                "transaction_id": claim.transactionID,
                "original_transaction_id": claim.originalTransactionID,
                "account_id": claim.accountID,
                "product_id": claim.productID,
                "state": state(of: claim, at: now),
                // The subscription's state (its latest claim's); null for other products.
                "subscription_state": subscriptionState.map { $0 as Any } ?? NSNull(),
                "expires_at": rfc3339(claim.expiresDate),
                "revoked_at": rfc3339(claim.revokedAt),
                // As the newest notification stated it; null until one did.
                "auto_renew": claim.autoRenew.map { $0 as Any } ?? NSNull(),
                // How Apple revoked it (`revocationType`, `revocationPercentage` in milliunits, `revocationReason`);
                // null when it did not say.
                "revocation_type": claim.revocation?.type.map { $0.rawValue as Any } ?? NSNull(),
                "revocation_percentage": claim.revocation?.percentage.map { $0 as Any } ?? NSNull(),
                "revocation_reason": claim.revocation?.reason.map { $0 as Any } ?? NSNull(),
                // `FAMILY_SHARED` for a family member's claim; null when Apple's answer did not say.
                "in_app_ownership_type": claim.ownershipType.map { $0.rawValue as Any } ?? NSNull(),
                // The storefront's country (ISO 3166-1 alpha-3); null when the store did not say (a legacy receipt)
                // or the claim predates schema version 9.
                "storefront": claim.storefront.map { $0 as Any } ?? NSNull(),
                "verdicts": verdicts,
            ])
        }
        return ["transactions": transactions]
    }

    /// The state of a subscription (all claims of one original transaction id): its latest claim's, as Apple's
    /// status of a subscription is its latest transaction's; nil when the claims are no auto-renewable subscription.
    public static func subscriptionState(of claims: [TransactionClaim], at now: Date) -> String? {
        guard let latest = TransactionClaim.latest(of: claims), latest.productType == .autoRenewable else { return nil }
        return state(of: latest, at: now)
    }

    /// `revoked`, `grace_period`, `expired` or `active`. `billing_retry` needs the renewal info the ledger does not
    /// record yet.
    public static func state(of claim: TransactionClaim, at now: Date) -> String {
        if claim.revokedAt != nil { return "revoked" }
        guard let expires = claim.expiresDate, expires <= now else { return "active" }
        if let grace = claim.gracePeriodExpiresDate, grace > now { return "grace_period" }
        return "expired"
    }

    /// The subscription a claim belongs to in the report: its original transaction id, the purchaser's claims apart
    /// from a family member's.
    private static func subscriptionKey(_ claim: TransactionClaim) -> String {
        claim.isFamilyShared ? "family:" + claim.originalTransactionID : claim.originalTransactionID
    }

    private static func rfc3339(_ date: Date?) -> Any {
        date.map { RFC3339.format($0) } ?? NSNull()
    }
}
