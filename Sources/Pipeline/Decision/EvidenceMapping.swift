import AppleClients
import Decision
import Foundation
import Ledger
import Messages
import Receipts

/// Turns what the worker learned (the local analysis, Apple's answers) into the ledger's ``PurchaseEvidence``, the
/// one model the decision rules read. Pure functions: no I/O.
public enum EvidenceMapping {
    // MARK: Local analysis

    /// The evidence of a local analysis. Rejections found locally are final; a valid JWS is authentic; a receipt
    /// whose state Apple holds is `unknown` (the ledger may still decide it: a repeat, a replay).
    public static func evidence(from analysis: ReceiptAnalysis) -> PurchaseEvidence {
        let environment = environment(analysis.environment)
        var evidence = PurchaseEvidence(
            source: .prefilter, authenticity: .unknown, environment: environment, bundleID: analysis.bundleID,
            transactions: analysis.transactions.map { transaction($0, renewal: analysis.renewalInfo) })
        switch analysis.verdict {
        case .malformed:
            evidence.rejection = .malformed
        case .wrongBundle:
            evidence.rejection = .wrongBundle
        case .unknownProduct:
            evidence.rejection = .unknownProduct
        case .environmentNotAllowed:
            evidence.rejection = .environmentNotAllowed
        case .notAuthenticated:
            evidence.source = .signature
            evidence.authenticity = .notAuthenticated
        case .locallyVerified:
            evidence.source = .signature
            evidence.authenticity = .authentic
            if let notification = analysis.notification {
                evidence.notification = subscriptionNotification(
                    notification, signedDate: analysis.signedDate, renewal: analysis.renewalInfo)
            }
        case .needsApple:
            break
        }
        return evidence
    }

    /// What a verified notification says, for the rules. Auto-renew comes from the subtype of
    /// `DID_CHANGE_RENEWAL_STATUS`, else from the signed renewal info's `autoRenewStatus`.
    static func subscriptionNotification(
        _ notification: NotificationInfo, signedDate: Date?, renewal: RenewalInfo?
    ) -> SubscriptionNotification {
        let autoRenew: Bool? =
            switch notification.subtype {
            case "AUTO_RENEW_ENABLED": true
            case "AUTO_RENEW_DISABLED": false
            default: renewal?.autoRenewStatus.map { $0 == 1 }
            }
        return SubscriptionNotification(
            kind: kind(ofNotificationType: notification.notificationType, subtype: notification.subtype),
            appleType: notification.notificationType, subtype: notification.subtype, signedDate: signedDate,
            autoRenew: autoRenew, appAppleID: notification.appAppleID)
    }

    /// App Store Server Notifications V2 types reduced to what changes an entitlement (docs/LEDGER.md,
    /// "Notification types"). A type this build does not know is `other`: recorded, changes nothing.
    public static func kind(ofNotificationType type: String, subtype: String?) -> SubscriptionNotification.Kind {
        switch type {
        case "DID_RENEW", "SUBSCRIBED", "DID_RECOVER", "OFFER_REDEEMED", "ONE_TIME_CHARGE": .renewed
        case "EXPIRED": .expired
        case "DID_FAIL_TO_RENEW": .renewalFailed
        case "GRACE_PERIOD_EXPIRED": .gracePeriodExpired
        case "REFUND": .refunded
        case "REVOKE": .revoked
        case "REFUND_REVERSED": .refundReversed
        case "RENEWAL_EXTENDED", "RENEWAL_EXTENSION": .extended
        case "DID_CHANGE_RENEWAL_STATUS": .renewalStatusChanged
        case "CONSUMPTION_REQUEST": .consumptionRequest
        case "REFUND_DECLINED": .refundDeclined
        // DID_CHANGE_RENEWAL_PREF, PRICE_INCREASE, PRICE_CHANGE, METADATA_UPDATE, MIGRATION, TEST,
        // EXTERNAL_PURCHASE_TOKEN, RESCIND_CONSENT and any later type.
        default: .other
        }
    }

    static func environment(_ environment: ReceiptEnvironment?) -> AppleEnvironment? {
        switch environment {
        case .none: nil
        case .some(.production): .production
        case .some(.sandbox): .sandbox
        case .some(.xcode), .some(.localTesting): .xcode
        case .some: .sandbox
        }
    }

    static func transaction(_ local: Receipts.ReceiptTransaction, renewal: RenewalInfo?) -> PurchaseTransaction {
        var transaction = PurchaseTransaction(
            transactionID: local.transactionID, originalTransactionID: local.originalTransactionID,
            productID: local.productID ?? "", productType: productType(ofJWSType: local.productType),
            purchaseDate: local.purchaseDate, expiresDate: local.expiresDate,
            revokedAt: local.revocationDate ?? local.cancellationDate, quantity: local.quantity,
            appAccountToken: local.appAccountToken)
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
    static func productType(ofJWSType type: String?) -> ProductType? {
        switch type {
        case "Auto-Renewable Subscription": .autoRenewable
        case "Non-Consumable": .nonConsumable
        case "Consumable": .consumable
        case "Non-Renewing Subscription": .nonRenewing
        default: nil
        }
    }

    // MARK: verifyReceipt

    /// The evidence of Apple's verifyReceipt answer. Statuses that describe our side (a wrong shared secret, a
    /// request Apple could not read) make the evidence `appleUnavailable` rather than rejecting a customer's
    /// purchase for an operator's mistake.
    public static func evidence(
        from response: VerifyReceiptResponse, local: PurchaseEvidence
    ) -> PurchaseEvidence {
        var evidence = PurchaseEvidence(
            source: .apple, authenticity: .unknown, environment: environment(response.environment),
            bundleID: response.receipt?.bundleID ?? local.bundleID, appleStatus: response.status.code)
        switch response.status {
        case .valid, .subscriptionExpired:
            evidence.authenticity = .authentic
            let renewals = Dictionary(
                response.pendingRenewalInfo.compactMap { info in info.originalTransactionID.map { ($0, info) } },
                uniquingKeysWith: { first, _ in first })
            let purchases =
                (response.receipt?.inApp ?? []) + response.latestReceiptInfo + response.latestExpiredReceiptInfo
            evidence.transactions = purchases.map { transaction($0, renewals: renewals) }
        case .receiptNotAuthenticated:
            evidence.authenticity = .notAuthenticated
        case .malformedReceiptData:
            evidence.rejection = .malformed
        case .sharedSecretMismatch, .requestNotPost:
            evidence = local
            evidence.appleUnavailable = true
            evidence.appleStatus = response.status.code
        default:
            evidence.rejection = .appleRejected
        }
        return evidence
    }

    static func environment(_ environment: AppleEnvironment) -> AppleEnvironment {
        switch environment {
        case .production: .production
        case .sandbox: .sandbox
        case .xcode, .localTesting: .xcode
        }
    }

    static func transaction(
        _ apple: AppleClients.ReceiptTransaction, renewals: [String: PendingRenewalInfo]
    ) -> PurchaseTransaction {
        var transaction = PurchaseTransaction(
            transactionID: apple.transactionID, originalTransactionID: apple.originalTransactionID,
            productID: apple.productID, purchaseDate: apple.purchaseDate, expiresDate: apple.expiresDate,
            revokedAt: apple.cancellationDate, quantity: apple.quantity, appAccountToken: apple.appAccountToken)
        if let renewal = renewals[transaction.subscriptionKey] {
            transaction.gracePeriodExpiresDate = renewal.gracePeriodExpiresDate
            transaction.isInBillingRetry = renewal.isInBillingRetryPeriod ?? false
            transaction.hasRenewalInfo = true
        }
        return transaction
    }

    // MARK: App Store Server API

    /// The evidence of a transaction Apple's Server API returned (its JWS already verified by the client).
    public static func evidence(from answer: TransactionInfoAnswer) -> PurchaseEvidence {
        let signed = answer.transaction
        let transaction = PurchaseTransaction(
            transactionID: signed.transactionID, originalTransactionID: signed.originalTransactionID,
            productID: signed.productID ?? "", productType: productType(ofJWSType: signed.type),
            purchaseDate: signed.purchaseDate, expiresDate: signed.expiresDate, revokedAt: signed.revocationDate,
            quantity: signed.quantity, appAccountToken: signed.appAccountToken)
        return PurchaseEvidence(
            source: .apple, authenticity: .authentic,
            environment: environment(signed.environment ?? answer.answeredBy), bundleID: signed.bundleID,
            transactions: [transaction], appleStatus: 200)
    }
}
