import Decision
import Foundation
import Messages

/// Google's answers as the facts the decision reads (``StoreAnswer``): what a purchase is, never whether to grant it.
///
/// Identities, as docs/LEDGER.md states them:
/// - a purchase's `original_transaction_id` is its purchase token: a subscription keeps it across renewals, and a
///   one-time purchase has its own;
/// - its `transaction_id` is the order id (a subscription's latest successful order: each renewal is a new one), or
///   the token when Google gives no order (a promotion code's purchase, a purchase not paid yet);
/// - a test purchase is `Sandbox`, any other `Production`;
/// - `obfuscatedExternalAccountId` is the account the app tagged the purchase with, compared as the App Store's
///   `appAccountToken` is.
extension GooglePlaySubscriptionPurchase {
    /// The facts of a `subscriptionsv2.get` answer about `token` of `packageName`.
    ///
    /// `SUBSCRIPTION_STATE_PENDING` is a purchase awaiting payment (``StoreAnswer/Status/pending``). Every other
    /// state is read from the line items' dates: `ACTIVE`, `CANCELED` (auto-renew off, access until `expiryTime`) and
    /// `IN_GRACE_PERIOD` entitle until `expiryTime` (in grace also the grace period's end); `ON_HOLD`, `PAUSED`, `EXPIRED` and `PENDING_PURCHASE_CANCELED`
    /// have an `expiryTime` in the past (or none: then `now`, so nothing entitles). Grace and hold are billing retry.
    public func storeAnswer(packageName: String, token: String, now: Date) -> StoreAnswer {
        let environment: AppleEnvironment = isTestPurchase ? .sandbox : .production
        if subscriptionState == "SUBSCRIPTION_STATE_PENDING" {
            return StoreAnswer(status: .pending, statusCode: 200, environment: environment, bundleID: packageName)
        }
        let entitles = Self.entitlingStates.contains(subscriptionState ?? "")
        let inGracePeriod = subscriptionState == "SUBSCRIPTION_STATE_IN_GRACE_PERIOD"
        let inBillingRetry = inGracePeriod || subscriptionState == "SUBSCRIPTION_STATE_ON_HOLD"
        let started = startTime.flatMap(RFC3339.parse)
        let transactions = lineItems.enumerated().map { index, item in
            let productID = item.productID ?? ""
            let expiry = item.expiryTime.flatMap(RFC3339.parse)
            return PurchaseTransaction(
                transactionID: Self.transactionID(
                    order: item.latestSuccessfulOrderID, token: token, productID: productID,
                    itemCount: lineItems.count),
                originalTransactionID: token, productID: productID, productType: .autoRenewable,
                purchaseDate: started,
                // A state that does not entitle never outlives its answer, whatever a line item's date says.
                expiresDate: entitles ? (expiry ?? now) : min(expiry ?? now, now),
                // In grace, `expiryTime` is the end of the grace period: access continues until then, as an App Store
                // subscription's does until its `gracePeriodExpiresDate`.
                gracePeriodExpiresDate: inGracePeriod ? expiry : nil,
                isInBillingRetry: inBillingRetry, hasRenewalInfo: true,
                appAccountToken: obfuscatedExternalAccountID, linkedSubscriptionKey: linkedPurchaseToken,
                orderID: item.latestSuccessfulOrderID, purchaseToken: token,
                isPaused: subscriptionState == "SUBSCRIPTION_STATE_PAUSED",
                storefront: StorefrontCountry.alpha3(googlePlayRegionCode: regionCode))
        }
        return StoreAnswer(
            status: .authentic, statusCode: 200, environment: environment, bundleID: packageName,
            transactions: transactions)
    }

    /// The states in which a subscription entitles until its line items' `expiryTime`.
    static let entitlingStates: Set<String> = [
        "SUBSCRIPTION_STATE_ACTIVE", "SUBSCRIPTION_STATE_CANCELED", "SUBSCRIPTION_STATE_IN_GRACE_PERIOD",
    ]

    /// A line item's transaction id: its order id, or the token when it has none; with the product id after `#` when
    /// the purchase has several items (they may share one order).
    static func transactionID(order: String?, token: String, productID: String, itemCount: Int) -> String {
        let id = order ?? token
        return itemCount > 1 ? id + "#" + productID : id
    }
}

extension GooglePlayProductPurchase {
    /// The facts of a `productsv2.getproductpurchasev2` answer about `token` of `packageName`.
    ///
    /// `PENDING` awaits payment (``StoreAnswer/Status/pending``); `CANCELLED` is a purchase that was cancelled or
    /// refunded (revoked at `now`: Google gives no date); `PURCHASED` is the purchase; its type (consumable or not)
    /// is the catalog's.
    public func storeAnswer(packageName: String, token: String, now: Date) -> StoreAnswer {
        let environment: AppleEnvironment = isTestPurchase ? .sandbox : .production
        if purchaseState == "PENDING" {
            return StoreAnswer(status: .pending, statusCode: 200, environment: environment, bundleID: packageName)
        }
        let revokedAt: Date? = purchaseState == "PURCHASED" ? nil : now
        let purchased = purchaseCompletionTime.flatMap(RFC3339.parse)
        let transactions = productLineItems.map { item in
            let productID = item.productID ?? ""
            return PurchaseTransaction(
                transactionID: GooglePlaySubscriptionPurchase.transactionID(
                    order: orderID, token: token, productID: productID, itemCount: productLineItems.count),
                originalTransactionID: token, productID: productID, purchaseDate: purchased, revokedAt: revokedAt,
                quantity: item.quantity, appAccountToken: obfuscatedExternalAccountID, orderID: orderID,
                purchaseToken: token, storefront: StorefrontCountry.alpha3(googlePlayRegionCode: regionCode))
        }
        return StoreAnswer(
            status: .authentic, statusCode: 200, environment: environment, bundleID: packageName,
            transactions: transactions)
    }
}
