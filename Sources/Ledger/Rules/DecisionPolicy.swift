import Foundation

/// The settings the decision rules read, besides the job, the evidence and the ledger.
public struct DecisionPolicy: Sendable, Hashable {
    /// Accept `Sandbox` and `Xcode` proofs (App Review buys in sandbox). Default: false.
    public var allowSandbox: Bool
    /// The instant of the decision: expiries are compared with it, and it becomes the verdict's `decided_at`
    /// (truncated to whole milliseconds, the precision the verdict's JSON carries).
    public var now: Date
    /// Bundle ids and products this deployment sells; `nil` leaves catalog checks to the local analysis.
    /// Default: nil.
    public var catalog: DecisionCatalog?

    public init(allowSandbox: Bool = false, now: Date, catalog: DecisionCatalog? = nil) {
        self.allowSandbox = allowSandbox
        self.now = now
        self.catalog = catalog
    }
}

/// The apps and products the rules accept, with each product's type.
public struct DecisionCatalog: Sendable, Hashable {
    public var bundleIDs: Set<String>
    public var products: [String: ProductType]

    public init(bundleIDs: Set<String>, products: [String: ProductType]) {
        self.bundleIDs = bundleIDs
        self.products = products
    }
}
