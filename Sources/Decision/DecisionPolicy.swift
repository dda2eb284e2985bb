import Foundation
import Messages

/// The settings the decision rules read, besides the job, the evidence and the ledger.
public struct DecisionPolicy: Sendable, Hashable {
    /// Accept `Sandbox` and `Xcode` proofs (App Review buys in sandbox). Default: false.
    public var allowSandbox: Bool
    /// The instant of the decision: expiries are compared with it, and it becomes the verdict's `decided_at`
    /// (truncated to whole milliseconds, the precision the verdict's JSON carries).
    public var now: Date
    /// Bundle ids and products this deployment sells; `nil` leaves catalog checks to the judgement of the proof
    /// (``ProofPolicy``). Default: nil.
    public var catalog: Catalog?
    /// The app's Apple id (`apple_app_apple_id`): a production notification naming another app (or none) is
    /// `rejected` / `wrong_app`. Nil checks nothing. Default: nil.
    public var appAppleID: Int64?

    public init(allowSandbox: Bool = false, now: Date, catalog: Catalog? = nil, appAppleID: Int64? = nil) {
        self.allowSandbox = allowSandbox
        self.now = now
        self.catalog = catalog
        self.appAppleID = appAppleID
    }
}
