/// App Store Server Notifications V2 types reduced to what changes an entitlement (docs/LEDGER.md, "Notification
/// types"): the one table the rules read a notification through.
public enum NotificationTable {
    /// The kind of a notification type and subtype. A type this build does not know is `other`: recorded, changes
    /// nothing.
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

    /// Whether the subscription renews after the notification: from the subtype of `DID_CHANGE_RENEWAL_STATUS`,
    /// else from the signed renewal info (nil when neither says).
    public static func autoRenew(subtype: String?, renewalAutoRenews: Bool?) -> Bool? {
        switch subtype {
        case "AUTO_RENEW_ENABLED": true
        case "AUTO_RENEW_DISABLED": false
        default: renewalAutoRenews
        }
    }
}
