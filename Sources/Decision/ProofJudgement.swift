import Messages

/// What can be decided about a proof from what it says by itself (``ProofFacts``), without the ledger or the
/// store: the one judgement of the app, the products and the environment a proof names.
public enum ProofJudgement: Sendable, Hashable {
    /// Not a receipt at all (cracker strings, truncated data, garbage).
    case malformed(reason: String)
    /// A receipt of another app: most forged traffic is a genuine receipt of someone else's app.
    case wrongBundle(bundleID: String?)
    /// A receipt of this app, but for products the catalog does not sell.
    case unknownProduct(productIDs: [String])
    /// The proof's signed data is for another product than the job names (Google Play's purchase data): the
    /// product it names.
    case productMismatch(productID: String?)
    /// The signature or its chain is wrong: forged or altered.
    case notAuthenticated(reason: String)
    /// The receipt's environment is not accepted by the policy (for example Sandbox in production, or Xcode); nil
    /// for an environment name the store does not have.
    case environmentNotAllowed(AppleEnvironment?)
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
        case .productMismatch: "product_mismatch"
        case .notAuthenticated: "not_authenticated"
        case .environmentNotAllowed: "environment_not_allowed"
        case .locallyVerified: "locally_verified"
        case .needsApple: "needs_apple"
        }
    }

    /// The verdict's reason when the proof's own facts reject it, as final; nil when the signature, Apple or the
    /// ledger has the last word.
    var rejection: Verdict.Reason? {
        switch self {
        case .malformed: .malformed
        case .wrongBundle: .wrongBundle
        case .unknownProduct: .unknownProduct
        case .productMismatch: .productMismatch
        case .environmentNotAllowed: .environmentNotAllowed
        case .notAuthenticated, .locallyVerified, .needsApple: nil
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

/// The settings of ``ProofJudgement``: what the deployment sells and which environments it accepts from a proof.
public struct ProofPolicy: Sendable, Hashable {
    /// Bundle ids and products this deployment sells; an empty list checks nothing. Default: any.
    public var catalog: Catalog
    /// Environments accepted. Default: production and sandbox.
    public var allowedEnvironments: Set<AppleEnvironment>
    /// Accept Xcode StoreKit-testing receipts (never valid in production). Default: false.
    public var allowXcode: Bool

    public init(
        catalog: Catalog = .any, allowedEnvironments: Set<AppleEnvironment> = [.production, .sandbox],
        allowXcode: Bool = false
    ) {
        self.catalog = catalog
        self.allowedEnvironments = allowedEnvironments
        self.allowXcode = allowXcode
    }

    /// Whether a proof naming `bundleID` is worth a signature check: not when the catalog lists bundle ids and this
    /// is none of them. Most traffic is other apps' receipts (seed 000, 79%); they are rejected as `wrong_bundle`
    /// whatever their signature, so checking it would only spend CPU.
    public func isWorthVerifying(bundleID: String?) -> Bool {
        guard !catalog.bundleIDs.isEmpty, let bundleID else { return true }
        return catalog.bundleIDs.contains(bundleID)
    }

    /// Judges a proof's facts; the order of the checks is the order of the cases.
    public func judge(_ facts: ProofFacts) -> ProofJudgement {
        if case .unreadable(let reason) = facts.kind { return .malformed(reason: reason) }
        if facts.store == .googlePlay { return judgeGooglePlay(facts) }
        let isXcode = facts.environment == .xcode
        if case .invalid(let reason) = facts.signature {
            return .notAuthenticated(reason: reason)
        }
        if facts.unrecognizedEnvironment != nil { return .environmentNotAllowed(nil) }
        if let environment = facts.environment {
            let allowed = isXcode ? allowXcode : allowedEnvironments.contains(environment)
            if !allowed { return .environmentNotAllowed(environment) }
        }
        if !catalog.bundleIDs.isEmpty {
            // Renewal info carries no bundle id; every other format must name an allowed one.
            if facts.kind != .signedPayloadWithoutApp {
                guard let bundle = facts.bundleID, catalog.bundleIDs.contains(bundle) else {
                    return .wrongBundle(bundleID: facts.bundleID)
                }
            }
        }
        if !catalog.products.isEmpty {
            let unknown = facts.productIDs.filter { catalog.productType(of: $0) == nil }
            if !facts.productIDs.isEmpty && unknown.count == facts.productIDs.count {
                return .unknownProduct(productIDs: Array(Set(unknown)).sorted())
            }
        }
        switch facts.kind {
        case .signedPayload, .signedPayloadWithoutApp:
            switch facts.signature {
            case .valid: return .locallyVerified
            case .notChecked where isXcode: return .locallyVerified
            case .untrusted(let reason), .notChecked(let reason), .invalid(let reason):
                // A JWS is self-contained: if its chain does not reach an anchor, Apple cannot vouch for it either.
                return .notAuthenticated(reason: reason)
            }
        case .storeHeld:
            if isXcode { return .locallyVerified }
            switch facts.signature {
            case .valid: return .needsApple(reason: "authentic receipt; current state is held by Apple")
            case .untrusted(let reason), .notChecked(let reason), .invalid(let reason):
                return .needsApple(reason: "signature not verifiable offline: \(reason)")
            }
        case .unreadable(let reason):
            return .malformed(reason: reason)
        }
    }

    /// Judges a Google Play purchase's facts. Its package must be one of the catalog's Play apps and its product one
    /// of its Play products (unless it lists none), before any signature matters: another app's purchase is
    /// rejected whatever its signature, and the store reads no signature without the app's key. A bad signature,
    /// then signed data for another app, product or token, reject it; anything else only Google can decide:
    /// nothing is ever granted from a purchase read locally.
    func judgeGooglePlay(_ facts: ProofFacts) -> ProofJudgement {
        guard let packageName = facts.bundleID, catalog.playApp(packageName: packageName) != nil else {
            return .wrongBundle(bundleID: facts.bundleID)
        }
        if !catalog.playProducts.isEmpty {
            let unknown = facts.productIDs.filter { catalog.playProducts[$0] == nil }
            if !facts.productIDs.isEmpty && unknown.count == facts.productIDs.count {
                return .unknownProduct(productIDs: Array(Set(unknown)).sorted())
            }
        }
        if case .invalid(let reason) = facts.signature { return .notAuthenticated(reason: reason) }
        for mismatch in facts.mismatches {
            switch mismatch {
            case .app(let other): return .wrongBundle(bundleID: other)
            case .product(let other): return .productMismatch(productID: other)
            case .purchaseToken:
                return .notAuthenticated(reason: "the signed purchase data is for another purchase token")
            }
        }
        return .needsApple(reason: "the purchase's state is held by Google Play")
    }
}
