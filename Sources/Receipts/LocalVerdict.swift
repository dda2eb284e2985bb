import Messages

/// What can be decided about a receipt without asking Apple.
public enum LocalVerdict: Sendable, Hashable {
    /// Not a receipt at all (cracker strings, truncated data, garbage).
    case malformed(reason: String)
    /// A receipt of another app: most forged traffic is a genuine receipt of someone else's app.
    case wrongBundle(bundleID: String?)
    /// A receipt of this app, but for products the catalog does not sell.
    case unknownProduct(productIDs: [String])
    /// The signature or its chain is wrong: forged or altered.
    case notAuthenticated(reason: String)
    /// The receipt's environment is not accepted by the policy (for example Sandbox in production, or Xcode).
    case environmentNotAllowed(ReceiptEnvironment)
    /// Authenticated offline: a JWS whose chain reaches a configured anchor (or an allowed Xcode receipt).
    case locallyVerified
    /// Plausible but only Apple can confirm it (app and iOS 6 receipts, whose state Apple holds).
    case needsApple(reason: String)

    /// The stable name used in JSON and metrics.
    public var code: String {
        switch self {
        case .malformed: "malformed"
        case .wrongBundle: "wrong_bundle"
        case .unknownProduct: "unknown_product"
        case .notAuthenticated: "not_authenticated"
        case .environmentNotAllowed: "environment_not_allowed"
        case .locallyVerified: "locally_verified"
        case .needsApple: "needs_apple"
        }
    }

    /// True when the receipt is rejected without an Apple call.
    public var isRejection: Bool {
        switch self {
        case .locallyVerified, .needsApple: false
        default: true
        }
    }
}

/// How strict the local analysis is.
public struct AnalysisPolicy: Sendable, Hashable {
    /// Environments accepted. Default: production and sandbox.
    public var allowedEnvironments: Set<ReceiptEnvironment>
    /// Accept Xcode StoreKit-testing receipts (never valid in production). Default: false.
    public var allowXcode: Bool
    /// Require Apple's marker extensions (leaf 1.2.840.113635.100.6.11.1, intermediate 1.2.840.113635.100.6.2.1)
    /// on chains that have an intermediate. Default: true.
    public var requireAppleMarkerOIDs: Bool
    /// The largest decoded input accepted. Default: 1 MiB.
    public var maximumDecodedSize: Int

    public init(
        allowedEnvironments: Set<ReceiptEnvironment> = [.production, .sandbox], allowXcode: Bool = false,
        requireAppleMarkerOIDs: Bool = true, maximumDecodedSize: Int = ReceiptInput.defaultMaximumDecodedSize
    ) {
        self.allowedEnvironments = allowedEnvironments
        self.allowXcode = allowXcode
        self.requireAppleMarkerOIDs = requireAppleMarkerOIDs
        self.maximumDecodedSize = maximumDecodedSize
    }

    /// Decides the verdict for an analysed receipt; the order of the checks is the order of the cases.
    func verdict(for analysis: ReceiptAnalysis, catalog: Catalog) -> LocalVerdict {
        if analysis.format == .unknown {
            return .malformed(reason: analysis.unknownReason ?? "not a receipt")
        }
        let isXcode = analysis.environment == .xcode
        if case .invalid(let reason) = analysis.signature {
            return .notAuthenticated(reason: reason)
        }
        if let environment = analysis.environment {
            let allowed = isXcode ? allowXcode : allowedEnvironments.contains(environment)
            if !allowed { return .environmentNotAllowed(environment) }
        }
        if !catalog.bundleIDs.isEmpty {
            // Renewal info carries no bundle id; every other format must name an allowed one.
            if analysis.format != .signedRenewalInfo {
                guard let bundle = analysis.bundleID, catalog.bundleIDs.contains(bundle) else {
                    return .wrongBundle(bundleID: analysis.bundleID)
                }
            }
        }
        if !catalog.products.isEmpty {
            var productIDs = analysis.transactions.compactMap(\.productID)
            if let renewal = analysis.renewalInfo?.productID { productIDs.append(renewal) }
            let unknown = productIDs.filter { catalog.productType(of: $0) == nil }
            if !productIDs.isEmpty && unknown.count == productIDs.count {
                return .unknownProduct(productIDs: Array(Set(unknown)).sorted())
            }
        }
        switch analysis.format {
        case .signedTransaction, .signedRenewalInfo, .notification, .appTransaction:
            switch analysis.signature {
            case .valid: return .locallyVerified
            case .notChecked where isXcode: return .locallyVerified
            case .untrusted(let reason), .notChecked(let reason), .invalid(let reason):
                // A JWS is self-contained: if its chain does not reach an anchor, Apple cannot vouch for it either.
                return .notAuthenticated(reason: reason)
            }
        case .appReceipt, .transactionReceipt:
            if isXcode { return .locallyVerified }
            switch analysis.signature {
            case .valid: return .needsApple(reason: "authentic receipt; current state is held by Apple")
            case .untrusted(let reason), .notChecked(let reason), .invalid(let reason):
                return .needsApple(reason: "signature not verifiable offline: \(reason)")
            }
        case .unknown:
            return .malformed(reason: analysis.unknownReason ?? "not a receipt")
        }
    }
}
