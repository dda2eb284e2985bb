import Decision
import Foundation
import GooglePlayClients
import Ledger
import Messages

/// Google Play notification jobs (`google_play_notification`; docs/LEDGER.md, "Google Play notifications"): a
/// notification carries no state, so each one reads the purchase from Google again, through the same read and single
/// flight as a verification, and the rules apply that answer. The notification says only why Google told us.
extension GooglePlayStore {
    /// The facts of a notification read locally: held by Google, unless its text is no DeveloperNotification, names
    /// another package or another purchase token than the job (`malformed` / `wrong_bundle`, decided without a read).
    static func facts(of notification: GooglePlayNotification) -> ProofFacts {
        let signature = ProofFacts.Signature.notChecked(reason: "a Google Play notification is not signed")
        func unreadable(_ reason: String) -> ProofFacts {
            ProofFacts(
                kind: .unreadable(reason: reason), signature: signature, bundleID: notification.packageName,
                store: .googlePlay)
        }
        var mismatches: [ProofFacts.Mismatch] = []
        if let text = notification.notification {
            let parsed: DeveloperNotification
            do {
                parsed = try DeveloperNotification.parse(text)
            } catch {
                return unreadable("the notification is not a DeveloperNotification: \(error)")
            }
            if parsed.packageName != notification.packageName { mismatches.append(.app(parsed.packageName)) }
            if let job = notification.purchaseToken, let named = parsed.purchaseToken, job != named {
                return unreadable("the notification names another purchase token than the job")
            }
        }
        return ProofFacts(
            kind: .storeHeld, signature: signature, bundleID: notification.packageName, store: .googlePlay,
            mismatches: mismatches)
    }

    /// What the notification says for the rules (``PlayNotification``), before the read: its kind, Google's name of
    /// its type, its token and event time, and what the kind records.
    static func playNotification(
        _ notification: GooglePlayNotification, parsed: DeveloperNotification?, jobID: String
    ) -> PlayNotification {
        let token = notification.purchaseToken ?? parsed?.purchaseToken
        let eventTime = parsed?.eventTimeMillis.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        var play = PlayNotification(kind: .restates, purchaseToken: token, eventTime: eventTime)
        switch parsed?.kind {
        case .none:
            // A reconciler's plain re-read: the purchase as Google holds it now.
            break
        case .subscription(let subscription):
            play.googleType = subscription.type?.name ?? "subscriptionNotification(\(subscription.notificationType))"
            switch subscription.type {
            case .revoked: play.kind = .revoked
            case .itemsChanged: play.kind = .itemsChanged
            case .canceled: play.autoRenew = false
            case .restarted: play.autoRenew = true
            default: break
            }
        case .oneTimeProduct(let product):
            play.googleType = product.type?.name ?? "oneTimeProductNotification(\(product.notificationType))"
        case .voidedPurchase(let voided):
            play.googleType = "voidedPurchaseNotification"
            play.kind = .voided
            play.voidedOrderID = voided.orderID
        case .pendingRefundReview(let review):
            play.googleType = "pendingRefundReviewNotification"
            play.kind = .refundReview
            play.refundReview = PlayRefundReview(
                pendingRefundToken: review.pendingRefundToken, purchaseToken: review.purchaseToken,
                orderID: review.orderID, packageName: notification.packageName,
                eventAt: eventTime ?? notification.publishedAt ?? Date(), jobID: jobID)
        case .test:
            play.googleType = "testNotification"
            play.kind = .test
            play.purchaseToken = nil
        case .unknown(let name):
            // A kind Google adds later: recorded, and the purchase restated when the job names a token.
            play.googleType = name
        }
        return play
    }

    /// Reads the purchase a notification is about and states it with the notification (``PlayNotification``); a test
    /// notification, or a later kind naming no token, is answered without a read.
    func verify(
        _ job: ReceiptJob, notification: GooglePlayNotification, local: LocalEvidence,
        deadline: ContinuousClock.Instant
    ) async throws -> PurchaseEvidence {
        let parsed = notification.notification.flatMap { try? DeveloperNotification.parse($0) }
        var play = Self.playNotification(notification, parsed: parsed, jobID: job.jobID)
        guard let token = play.purchaseToken else {
            var evidence = PurchaseEvidence(
                source: .apple, authenticity: .authentic, bundleID: notification.packageName, store: .googlePlay)
            evidence.playNotification = play
            return evidence
        }
        guard let client = clients[notification.packageName] else { return local.unavailable }
        let purchaseRead = PurchaseRead(
            packageName: notification.packageName, token: token,
            isSubscription: await isSubscription(token, parsed: parsed))
        guard let (answer, at) = try await read(purchaseRead, for: job, client: client, deadline: deadline) else {
            return local.unavailable
        }
        var evidence = EvidenceMapping.evidence(from: answer, local: local.evidence)
        play.readAt = at
        evidence.playNotification = play
        return evidence
    }

    /// Which read a token needs: the notification's kind says for a subscription's or a one-time product's
    /// notification and for a voided purchase (`productType`); otherwise the ledger's claims on the token; with
    /// neither, a subscription (the reconciler re-reads only subscriptions).
    func isSubscription(_ token: String, parsed: DeveloperNotification?) async -> Bool {
        switch parsed?.kind {
        case .subscription: return true
        case .oneTimeProduct: return false
        case .voidedPurchase(let voided) where voided.voidedProductType != nil:
            return voided.voidedProductType == .subscription
        default:
            // A ledger that cannot be read now: the subscription read, whose 404 for a one-time token is an answer.
            let claims = (try? await purchaseClaims?.subscriptionClaims(originalTransactionID: token)) ?? []
            guard let claim = claims.first else { return true }
            return claim.productType == .autoRenewable
        }
    }
}
