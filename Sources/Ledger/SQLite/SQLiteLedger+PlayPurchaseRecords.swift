import CodedErrors
import Decision
import Foundation
import SQLiteStorage

/// Google Play's pending purchases and refund reviews (docs/LEDGER.md, "Google Play notifications").
extension SQLiteLedger {
    public func pendingPlayPurchase(purchaseToken: String) async throws -> PendingPlayPurchase? {
        try await executor.run { connection, _ in
            try connection.query(
                """
                SELECT account_id, job_id, package_name, product_id, created_at
                FROM play_pending_purchases WHERE purchase_token = ?
                """, [.text(purchaseToken)]
            ).first.map { row throws(LedgerError) -> PendingPlayPurchase in
                guard let account = row[0].text, let job = row[1].text, let package = row[2].text,
                    let product = row[3].text, let created = row[4].date
                else { throw LedgerError(.corrupt, "a play_pending_purchases row could not be read") }
                return PendingPlayPurchase(
                    purchaseToken: purchaseToken, accountID: account, jobID: job, packageName: package,
                    productID: product, recordedAt: created)
            }
        }
    }

    public func playRefundReview(pendingRefundToken: String) async throws -> PlayRefundReview? {
        try await refundReviews(
            "SELECT \(Self.reviewColumns) FROM play_refund_reviews WHERE pending_refund_token = ?",
            [.text(pendingRefundToken)]
        ).first
    }

    public func playRefundReviews(deadlineAfter: Date, limit: Int) async throws -> [PlayRefundReview] {
        try await refundReviews(
            """
            SELECT \(Self.reviewColumns) FROM play_refund_reviews
            WHERE deadline > ? ORDER BY deadline, pending_refund_token LIMIT ?
            """, [SQLiteValue(deadlineAfter), SQLiteValue(max(limit, 0))])
    }

    private static let reviewColumns =
        "pending_refund_token, purchase_token, order_id, package_name, event_at, deadline, job_id"

    private func refundReviews(_ sql: String, _ values: [SQLiteValue]) async throws -> [PlayRefundReview] {
        try await executor.run { connection, _ in
            try connection.query(sql, values).map { row throws(LedgerError) -> PlayRefundReview in
                guard let review = row[0].text, let token = row[1].text, let order = row[2].text,
                    let package = row[3].text, let event = row[4].date, let deadline = row[5].date,
                    let job = row[6].text
                else { throw LedgerError(.corrupt, "a play_refund_reviews row could not be read") }
                return PlayRefundReview(
                    pendingRefundToken: review, purchaseToken: token, orderID: order, packageName: package,
                    eventAt: event, deadline: deadline, jobID: job)
            }
        }
    }
}
