import Decision
import Foundation
import Messages

extension VerifyReceiptResponse {
    /// verifyReceipt's answer as the store-neutral facts Decision turns into evidence (`EvidenceMapping`): its
    /// status reduced to what it says about the proof, and its purchases (`in_app`, `latest_receipt_info`, the
    /// expired ones) with the pending renewal info of their subscription.
    public var storeAnswer: StoreAnswer {
        var answer = StoreAnswer(
            status: Self.answerStatus(status), statusCode: status.code, environment: environment,
            bundleID: receipt?.bundleID)
        guard answer.status == .authentic else { return answer }
        let renewals = Dictionary(
            pendingRenewalInfo.compactMap { info in info.originalTransactionID.map { ($0, info) } },
            uniquingKeysWith: { first, _ in first })
        let purchases = (receipt?.inApp ?? []) + latestReceiptInfo + latestExpiredReceiptInfo
        answer.transactions = purchases.map { Self.purchase($0, renewals: renewals) }
        return answer
    }

    /// Statuses that describe this deployment's side (a wrong shared secret, a request Apple could not read) are
    /// `refusedRequest`, not a verdict on the customer's purchase.
    static func answerStatus(_ status: VerifyReceiptStatus) -> StoreAnswer.Status {
        switch status {
        case .valid, .subscriptionExpired: .authentic
        case .receiptNotAuthenticated: .notAuthenticated
        case .malformedReceiptData: .unreadableProof
        case .sharedSecretMismatch, .requestNotPost: .refusedRequest
        default: .rejected
        }
    }

    static func purchase(_ apple: ReceiptTransaction, renewals: [String: PendingRenewalInfo]) -> PurchaseTransaction {
        var transaction = PurchaseTransaction(
            transactionID: apple.transactionID, originalTransactionID: apple.originalTransactionID,
            productID: apple.productID, purchaseDate: apple.purchaseDate, expiresDate: apple.expiresDate,
            revokedAt: apple.cancellationDate, quantity: apple.quantity, appAccountToken: apple.appAccountToken,
            revocation: apple.cancellationDate == nil ? nil : Revocation(reason: apple.cancellationReason),
            ownershipType: apple.inAppOwnershipType.map { OwnershipType($0) })
        if let renewal = renewals[transaction.subscriptionKey] {
            transaction.gracePeriodExpiresDate = renewal.gracePeriodExpiresDate
            transaction.isInBillingRetry = renewal.isInBillingRetryPeriod ?? false
            transaction.hasRenewalInfo = true
        }
        return transaction
    }
}
