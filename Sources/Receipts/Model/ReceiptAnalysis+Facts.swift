import Decision
import Foundation
import Messages

extension ReceiptAnalysis {
    /// What the receipt says, as the store-neutral facts Decision judges (`ProofPolicy`) and turns into evidence
    /// (`EvidenceMapping`). Only Apple's spellings are read here: the JWS product types, the renewal info's status.
    public var facts: ProofFacts {
        var productIDs = transactions.compactMap(\.productID)
        if let renewal = renewalInfo?.productID { productIDs.append(renewal) }
        return ProofFacts(
            kind: kind, signature: signatureFact, environment: environment,
            unrecognizedEnvironment: unrecognizedEnvironment, bundleID: bundleID, productIDs: productIDs,
            transactions: transactions.map { Self.purchase($0, renewal: renewalInfo) },
            notification: notification.map { notification in
                ProofFacts.Notification(
                    type: notification.notificationType, subtype: notification.subtype,
                    appAppleID: notification.appAppleID, renewalAutoRenews: renewalInfo?.autoRenewStatus.map { $0 == 1 }
                )
            },
            signedDate: signedDate)
    }

    private var kind: ProofFacts.Kind {
        switch format {
        case .unknown: .unreadable(reason: unknownReason ?? "not a receipt")
        case .signedRenewalInfo: .signedPayloadWithoutApp
        case .signedTransaction, .notification, .appTransaction: .signedPayload
        case .appReceipt, .transactionReceipt: .storeHeld
        }
    }

    private var signatureFact: ProofFacts.Signature {
        switch signature {
        case .valid: .valid
        case .invalid(let reason): .invalid(reason: reason)
        case .untrusted(let reason): .untrusted(reason: reason)
        case .notChecked(let reason): .notChecked(reason: reason)
        }
    }

    static func purchase(_ local: ReceiptTransaction, renewal: RenewalInfo?) -> PurchaseTransaction {
        var transaction = PurchaseTransaction(
            transactionID: local.transactionID, originalTransactionID: local.originalTransactionID,
            productID: local.productID ?? "", productType: productType(ofJWSType: local.productType),
            purchaseDate: local.purchaseDate, expiresDate: local.expiresDate,
            revokedAt: local.revocationDate ?? local.cancellationDate, quantity: local.quantity,
            appAccountToken: local.appAccountToken,
            revocation: local.isRevoked
                ? Revocation(
                    type: local.revocationType.map { Revocation.Kind($0) }, percentage: local.revocationPercentage,
                    reason: local.revocationReason) : nil,
            ownershipType: local.inAppOwnershipType.map { OwnershipType($0) },
            storefront: StorefrontCountry.alpha3(appStoreStorefront: local.storefront))
        if let renewal,
            renewal.originalTransactionID == nil || renewal.originalTransactionID == transaction.subscriptionKey
        {
            transaction.isInBillingRetry = renewal.isInBillingRetryPeriod ?? false
            transaction.gracePeriodExpiresDate = renewal.gracePeriodExpiresDate
            transaction.hasRenewalInfo = true
        }
        return transaction
    }

    /// The JWS `type` field (`Auto-Renewable Subscription`, `Non-Consumable`, `Consumable`,
    /// `Non-Renewing Subscription`); nil when absent or unknown (the catalog decides then).
    public static func productType(ofJWSType type: String?) -> ProductType? {
        switch type {
        case "Auto-Renewable Subscription": .autoRenewable
        case "Non-Consumable": .nonConsumable
        case "Consumable": .consumable
        case "Non-Renewing Subscription": .nonRenewing
        default: nil
        }
    }
}
