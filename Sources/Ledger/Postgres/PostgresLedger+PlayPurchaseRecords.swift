import Decision
import Foundation
import PostgresNIO
import PostgresSettings

/// Google Play's pending purchases and refund reviews (docs/LEDGER.md, "Google Play notifications").
extension PostgresLedger {
    public func pendingPlayPurchase(purchaseToken: String) async throws -> PendingPlayPurchase? {
        try await operation("pending play purchase") { pool, logger in
            try await pool.withConnection { connection in
                let rows = try await connection.query(
                    """
                    SELECT account_id, job_id, package_name, product_id, created_at
                    FROM play_pending_purchases WHERE purchase_token = \(purchaseToken)
                    """, logger: logger
                ).decode((String, String, String, String, Date).self).collected()
                return rows.first.map {
                    PendingPlayPurchase(
                        purchaseToken: purchaseToken, accountID: $0.0, jobID: $0.1, packageName: $0.2,
                        productID: $0.3, recordedAt: $0.4)
                }
            }
        }
    }

    public func playRefundReview(pendingRefundToken: String) async throws -> PlayRefundReview? {
        try await refundReviews(
            PostgresQuery(
                """
                SELECT \(unescaped: Self.reviewColumns) FROM play_refund_reviews
                WHERE pending_refund_token = \(pendingRefundToken)
                """)
        ).first
    }

    public func playRefundReviews(deadlineAfter: Date, limit: Int) async throws -> [PlayRefundReview] {
        try await refundReviews(
            PostgresQuery(
                """
                SELECT \(unescaped: Self.reviewColumns) FROM play_refund_reviews
                WHERE deadline > \(deadlineAfter) ORDER BY deadline, pending_refund_token LIMIT \(max(limit, 0))
                """))
    }

    private static let reviewColumns =
        "pending_refund_token, purchase_token, order_id, package_name, event_at, deadline, job_id"

    private func refundReviews(_ query: PostgresQuery) async throws -> [PlayRefundReview] {
        try await operation("play refund reviews") { pool, logger in
            try await pool.withConnection { connection in
                let rows = try await connection.query(query, logger: logger)
                    .decode((String, String, String, String, Date, Date, String).self).collected()
                return rows.map {
                    PlayRefundReview(
                        pendingRefundToken: $0.0, purchaseToken: $0.1, orderID: $0.2, packageName: $0.3,
                        eventAt: $0.4, deadline: $0.5, jobID: $0.6)
                }
            }
        }
    }
}
