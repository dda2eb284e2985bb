import Decision
import Foundation
import Messages

/// Reads a Google Play purchase locally into ``ProofFacts``: the token's shape, and when the client sent the signed
/// purchase data, its signature against the app's licensing key and what it names against the job's package,
/// product and token. Facts only: the decision (``ProofPolicy``) judges them, and a purchase read locally is never
/// granted from them (its state is Google's).
public struct PlayPurchaseReader: Sendable {
    /// Each Play app's licensing key, by package name (``PlayLicensingKeys/load(_:readFile:)``).
    public let licensingKeys: [String: PlayLicensingKey]

    public init(licensingKeys: [String: PlayLicensingKey]) {
        self.licensingKeys = licensingKeys
    }

    /// The facts of `purchase`.
    public func facts(of purchase: GooglePlayPurchase) -> ProofFacts {
        var facts = ProofFacts(
            kind: .storeHeld, signature: .notChecked(reason: "no signed purchase data"),
            bundleID: purchase.packageName, productIDs: [purchase.productID], store: .googlePlay)
        if let problem = PlayPurchaseToken.problem(purchase.purchaseToken) {
            facts.kind = .unreadable(reason: problem)
            return facts
        }
        guard let data = purchase.purchaseData, let signature = purchase.signature else { return facts }
        // Another app's key is never tried: the catalog decides such a purchase, whatever its signature.
        guard let key = licensingKeys[purchase.packageName] else {
            facts.signature = .notChecked(reason: "no licensing key for the package")
            return facts
        }
        let bytes = Array(data.utf8)
        guard key.isValidSignature(signature, for: bytes) else {
            facts.signature = .invalid(
                reason: "the purchase data's signature does not verify with the app's licensing key")
            return facts
        }
        facts.signature = .valid
        // Parsed only once its signature verifies: only bytes the app's key signed reach the JSON parser.
        guard let signed = SignedPurchaseData(bytes) else {
            facts.kind = .unreadable(reason: "the signed purchase data is not a JSON object")
            return facts
        }
        if signed.packageName != purchase.packageName { facts.mismatches.append(.app(signed.packageName)) }
        if !signed.productIDs.contains(purchase.productID) {
            facts.mismatches.append(.product(signed.productIDs.first))
        }
        if signed.purchaseToken != purchase.purchaseToken { facts.mismatches.append(.purchaseToken) }
        return facts
    }
}

/// What the signed purchase data (`Purchase.getOriginalJson()`) names: the package, the product (`productId`, or
/// each of `productIds` in a purchase of several) and the token.
struct SignedPurchaseData {
    var packageName: String?
    var productIDs: [String]
    var purchaseToken: String?

    init?(_ bytes: [UInt8]) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else { return nil }
        packageName = object["packageName"] as? String
        purchaseToken = object["purchaseToken"] as? String
        if let id = object["productId"] as? String {
            productIDs = [id]
        } else {
            productIDs = (object["productIds"] as? [Any])?.compactMap { $0 as? String } ?? []
        }
    }
}
