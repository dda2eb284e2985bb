import Messages

/// Each verdict outcome, reason code and lifecycle event in words, for support staff (the console and the history
/// API). A code this build does not know is said to be one: the contract lets the list grow. Words that name the
/// store name the verdict's (or the event's transaction's) store: the App Store's when none is given.
public enum ReasonText {
    public static func explain(outcome: String?, reason: String?, store: Store? = nil) -> String? {
        if let reason {
            return (store == .googlePlay ? playReasons[reason] : nil) ?? reasons[reason]
                ?? "Rejected for a reason this service does not know (\(reason)); nothing was granted."
        }
        switch outcome {
        case "granted": return "A new, authentic purchase: granted to this account."
        case "already_granted": return "This account already owns the purchase: nothing new to grant."
        case "rejected": return "Not a valid purchase for this account."
        case "unverifiable": return "\(name(of: store)) could not be reached in time; nothing was decided or granted."
        default: return nil
        }
    }

    /// Who answers for `store`, in the sentences.
    static func name(of store: Store?) -> String { store == .googlePlay ? "Google Play" : "Apple" }

    /// The codes whose words differ for a Google Play verdict; every other code (Google Play's own included) reads as
    /// in ``reasons``.
    public static let playReasons: [String: String] = [
        "malformed": "The proof is not a Google Play purchase (garbage or unreadable). Nothing was granted.",
        "wrong_bundle": "The purchase belongs to another app. Nothing was granted.",
        "not_authenticated":
            "The purchase's signature is invalid, or Google Play said it is not authentic. Nothing was granted.",
        "revoked": "Google Play refunded, voided or revoked the purchase. Its entitlement ends.",
        "no_transaction": "The purchase is not of a product this app sells. Nothing was granted.",
        "product_mismatch":
            "The purchase is not of the product the app asked for, or its signed data names another. Nothing was "
            + "granted.",
    ]

    public static let reasons: [String: String] = [
        "malformed": "The proof is not a receipt at all (garbage, cracker-made or unreadable). Nothing was granted.",
        "wrong_bundle": "The receipt belongs to another app. Nothing was granted.",
        "unknown_product": "The product is not in the catalog. Nothing was granted.",
        "replayed": "The purchase is already owned by another account; it was not granted to this one.",
        "not_authenticated":
            "The signature is invalid, or Apple said the receipt is not authentic. Nothing was granted.",
        "expired":
            "The subscription period is over. The purchase is kept in this account's history but grants nothing now.",
        "revoked": "Apple refunded or revoked the purchase. Its entitlement ends.",
        "environment_not_allowed": "A sandbox or Xcode purchase where only production counts. Nothing was granted.",
        "apple_unavailable":
            "Apple could not be reached before the deadline; nothing was decided. The customer may retry.",
        "no_transaction": "The receipt holds no purchase of a product this app sells. Nothing was granted.",
        "product_mismatch":
            "The receipt holds purchases, but none of the product the app asked for. Nothing was granted.",
        "apple_rejected": "Apple refused the request (for example an account or secret problem). Nothing was granted.",
        "already_owned": "This account already owns the purchase: nothing new to grant.",
        "unclaimed": "An App Store notification about a subscription no account owns. Nothing was changed.",
        "job_id_reused":
            "The job id was already used for another purchase or account, so this proof was not decided again. "
            + "The app must send a new job id for a new attempt. Nothing was granted.",
        "account_token_mismatch":
            "The purchase was made for another account (its appAccountToken is not this account's). Nothing was "
            + "granted.",
        "wrong_app": "A notification for another app. Nothing was changed.",
        "notification_recorded":
            "A store notification about no purchase (a test, a summary or a consent change): recorded, nothing "
            + "changed.",
        "google_play_unavailable":
            "Google Play could not be reached before the deadline; nothing was decided. The customer may retry.",
        "google_play_rejected": "Google Play refused the request about this purchase. Nothing was granted.",
        "purchase_not_found":
            "Google Play knows no such purchase for this app (forged, another app's, or gone). Nothing was granted.",
        "purchase_pending": "The purchase awaits payment: nothing is granted until it is paid and sent again.",
    ]

    /// A verdict's explanation, told more precisely when it states how its transactions were revoked: a partial
    /// refund with its share, a family member's access removed.
    public static func explain(
        outcome: String?, reason: String?, store: Store? = nil, revocations: [TransactionRevocation]?
    ) -> String? {
        guard let revocation = revocations?.first(where: { $0.type != nil }), let type = revocation.type else {
            return explain(outcome: outcome, reason: reason, store: store)
        }
        let who = name(of: store)
        switch type {
        case TransactionRevocation.familyRevoke:
            return "Family Sharing ended for this member (the purchaser stopped sharing or left the family): this "
                + "account's access ends. Nothing was refunded to it."
        case TransactionRevocation.refundProrated:
            let share = revocation.percentage.map { " (\(percent($0)) of the price)" } ?? ""
            return "\(who) refunded part of the purchase\(share), prorated: its entitlement ends."
        case TransactionRevocation.refundFull:
            return "\(who) refunded the purchase in full: its entitlement ends."
        default:
            return explain(outcome: outcome, reason: reason, store: store)
        }
    }

    /// A share in thousandths of a percent (40000) as text ("40 %", "33.3 %").
    static func percent(_ milliunits: Int) -> String {
        let tenths = (milliunits + 50) / 100
        return tenths % 10 == 0 ? "\(tenths / 10) %" : "\(tenths / 10).\(tenths % 10) %"
    }

    public static func explain(event: LifecycleEvent.Kind, store: Store = .appStore) -> String {
        let who = name(of: store)
        return switch event {
        case .initialPurchase: "The entitlement started with a first purchase."
        case .renewal: "The subscription renewed for a new period."
        case .expiration: "The entitlement ended: its period is over."
        case .billingIssue: "\(who) could not charge the renewal (billing retry)."
        case .gracePeriodEntered: "Billing retry with a grace period: the entitlement stays active until it ends."
        case .refund: "\(who) refunded or revoked the purchase: the entitlement it gave ends."
        case .refundReversed: "A refund was reversed: the purchase counts again."
        case .transfer: "The subscription moved between accounts (a current period bought on another account)."
        case .productChange: "The subscription changed product (upgrade, downgrade or crossgrade)."
        case .renewalExtended: "\(who) extended the renewal date: the current period lasts longer, at no charge."
        }
    }

    /// Why a message was ignored, in words.
    public static func explain(problem: String) -> String {
        let code = problem.split(separator: ":").first.map(String.init) ?? problem
        switch code {
        case "unsupported_schema": return "A message of a schema this service does not read; ignored, nothing changed."
        case "unknown_outcome": return "A verdict with an outcome this service does not know; ignored, nothing changed."
        case "invalid_identifier": return "A verdict with an id out of bounds; ignored, nothing changed."
        default: return "A message that is not a readable verdict; ignored, nothing changed."
        }
    }
}
