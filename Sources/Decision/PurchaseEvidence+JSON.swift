import Foundation
import Messages

/// ``PurchaseEvidence`` as compact JSON, for the verification lease (Apple's answer shared with the other workers
/// for a few seconds, docs/LEDGER.md). It holds what the rules read: ids, product ids, dates, statuses; never the
/// receipt. Versioned: a reader that finds another version treats the answer as absent and asks Apple itself.
extension PurchaseEvidence {
    /// The version written by this build.
    static let jsonVersion = 1

    /// The evidence as JSON (dates in milliseconds since 1970, as Apple gives them).
    public func jsonText() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Every member is a string, a number, a boolean or an array of them: encoding cannot fail.
        let data = (try? encoder.encode(StoredEvidence(self))) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// The evidence stored by ``jsonText()``, or nil for JSON of another version or shape.
    public init?(jsonText: String) {
        guard let stored = try? JSONDecoder().decode(StoredEvidence.self, from: Data(jsonText.utf8)),
            stored.v == Self.jsonVersion, let evidence = stored.evidence
        else { return nil }
        self = evidence
    }
}

/// The stored shape of ``PurchaseEvidence`` (short keys: a row is read by every worker that waited for it).
private struct StoredEvidence: Codable {
    struct Transaction: Codable {
        var id: String
        var original: String?
        var product: String
        var type: String?
        var purchased: Int64?
        var expires: Int64?
        var revoked: Int64?
        var grace: Int64?
        var retry: Bool?
        var quantity: Int?
        var token: String?
        var revocationType: String?
        var revocationPercentage: Int?
        var revocationReason: Int?
        var ownership: String?
        var storefront: String?
    }

    var v: Int
    var source: String
    var authenticity: String
    var environment: String?
    var bundle: String?
    var transactions: [Transaction]
    var rejection: String?
    var status: Int?
    var unavailable: Bool?
    var notification: String?
    var appleType: String?
    var subtype: String?
    var signed: Int64?
    var autoRenew: Bool?
    var appAppleID: Int64?

    init(_ evidence: PurchaseEvidence) {
        v = PurchaseEvidence.jsonVersion
        source = evidence.source.rawValue
        authenticity = evidence.authenticity.rawValue
        environment = evidence.environment?.rawValue
        bundle = evidence.bundleID
        transactions = evidence.transactions.map { transaction in
            Transaction(
                id: transaction.transactionID, original: transaction.originalTransactionID,
                product: transaction.productID, type: transaction.productType?.rawValue,
                purchased: transaction.purchaseDate.map(Self.milliseconds),
                expires: transaction.expiresDate.map(Self.milliseconds),
                revoked: transaction.revokedAt.map(Self.milliseconds),
                grace: transaction.gracePeriodExpiresDate.map(Self.milliseconds),
                retry: transaction.hasRenewalInfo ? transaction.isInBillingRetry : nil, quantity: transaction.quantity,
                token: transaction.appAccountToken, revocationType: transaction.revocation?.type?.rawValue,
                revocationPercentage: transaction.revocation?.percentage,
                revocationReason: transaction.revocation?.reason, ownership: transaction.ownershipType?.rawValue,
                storefront: transaction.storefront)
        }
        rejection = evidence.rejection?.rawValue
        status = evidence.appleStatus
        unavailable = evidence.appleUnavailable ? true : nil
        notification = evidence.notification?.kind.rawValue
        appleType = evidence.notification?.appleType
        subtype = evidence.notification?.subtype
        signed = evidence.notification?.signedDate.map(Self.milliseconds)
        autoRenew = evidence.notification?.autoRenew
        appAppleID = evidence.notification?.appAppleID
    }

    /// Nil when a member names a case this build does not know.
    var evidence: PurchaseEvidence? {
        guard let source = PurchaseEvidence.Source(rawValue: source),
            let authenticity = PurchaseEvidence.Authenticity(rawValue: authenticity)
        else { return nil }
        var evidence = PurchaseEvidence(source: source, authenticity: authenticity)
        if let environment {
            guard let known = AppleEnvironment(rawValue: environment) else { return nil }
            evidence.environment = known
        }
        evidence.bundleID = bundle
        var decoded: [PurchaseTransaction] = []
        for transaction in transactions {
            var productType: ProductType?
            if let type = transaction.type {
                guard let known = ProductType(rawValue: type) else { return nil }
                productType = known
            }
            decoded.append(
                PurchaseTransaction(
                    transactionID: transaction.id, originalTransactionID: transaction.original,
                    productID: transaction.product, productType: productType,
                    purchaseDate: transaction.purchased.map(Self.date), expiresDate: transaction.expires.map(Self.date),
                    revokedAt: transaction.revoked.map(Self.date),
                    gracePeriodExpiresDate: transaction.grace.map(Self.date),
                    isInBillingRetry: transaction.retry ?? false, hasRenewalInfo: transaction.retry != nil,
                    quantity: transaction.quantity,
                    appAccountToken: transaction.token,
                    revocation: Revocation(
                        type: transaction.revocationType.map { Revocation.Kind($0) },
                        percentage: transaction.revocationPercentage, reason: transaction.revocationReason),
                    ownershipType: transaction.ownership.map { OwnershipType($0) },
                    storefront: transaction.storefront))
        }
        evidence.transactions = decoded
        evidence.rejection = rejection.map(Verdict.Reason.init(rawValue:))
        evidence.appleStatus = status
        evidence.appleUnavailable = unavailable ?? false
        if let notification {
            guard let kind = SubscriptionNotification.Kind(rawValue: notification) else { return nil }
            evidence.notification = SubscriptionNotification(
                kind: kind, appleType: appleType, subtype: subtype, signedDate: signed.map(Self.date),
                autoRenew: autoRenew, appAppleID: appAppleID)
        }
        return evidence
    }

    static func milliseconds(_ date: Date) -> Int64 {
        date.epochMilliseconds
    }

    static func date(_ milliseconds: Int64) -> Date {
        Date(epochMilliseconds: milliseconds)
    }
}
