import Foundation
import Messages

/// The settings the decision rules read, besides the job, the evidence and the ledger.
public struct DecisionPolicy: Sendable, Hashable {
    /// Accept `Sandbox` and `Xcode` proofs (App Review buys in sandbox). Default: false.
    public var allowSandbox: Bool
    /// The instant of the decision: expiries are compared with it, and it becomes the verdict's `decided_at`
    /// (truncated to whole milliseconds, the precision the verdict's JSON carries).
    public var now: Date
    /// Bundle ids and products this deployment sells; `nil` leaves catalog checks to the local analysis.
    /// Default: nil.
    public var catalog: Catalog?

    public init(allowSandbox: Bool = false, now: Date, catalog: Catalog? = nil) {
        self.allowSandbox = allowSandbox
        self.now = now
        self.catalog = catalog
    }
}
