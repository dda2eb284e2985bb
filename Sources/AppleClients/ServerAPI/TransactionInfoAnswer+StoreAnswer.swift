import Decision
import Foundation
import Messages
import Receipts

extension TransactionInfoAnswer {
    /// A transaction the Server API returned (its JWS already verified by the client) as the store-neutral facts
    /// Decision turns into evidence: authentic, in the environment it names (else the one whose endpoint answered).
    public var storeAnswer: StoreAnswer {
        StoreAnswer(
            status: .authentic, statusCode: 200, environment: transaction.environment ?? answeredBy,
            bundleID: transaction.bundleID, transactions: [transaction.purchase])
    }
}

extension SignedTransaction {
    /// The transaction as Decision's store-neutral purchase.
    public var purchase: PurchaseTransaction {
        PurchaseTransaction(
            transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID ?? "",
            productType: ReceiptAnalysis.productType(ofJWSType: type), purchaseDate: purchaseDate,
            expiresDate: expiresDate,
            revokedAt: revocationDate, quantity: quantity, appAccountToken: appAccountToken,
            revocation: revocationDate == nil
                ? nil
                : Revocation(
                    type: revocationType.map { Revocation.Kind($0) }, percentage: revocationPercentage,
                    reason: revocationReason),
            ownershipType: inAppOwnershipType.map { OwnershipType($0) },
            storefront: StorefrontCountry.alpha3(appStoreStorefront: storefront))
    }

}
