/// How the local analysis reads and verifies a receipt. What is accepted (the app, the products, the environments)
/// is not the analysis's to say: Decision's `ProofPolicy` judges the facts it reports.
public struct AnalysisPolicy: Sendable, Hashable {
    /// Check Xcode StoreKit-testing receipts' own unanchored chains, reporting a consistent one as not checked
    /// rather than untrusted (the worker's `allow_xcode`). Default: false.
    public var allowXcode: Bool
    /// Require Apple's marker extensions (leaf 1.2.840.113635.100.6.11.1, intermediate 1.2.840.113635.100.6.2.1)
    /// on chains that have an intermediate. Default: true.
    public var requireAppleMarkerOIDs: Bool
    /// The largest decoded input accepted. Default: 1 MiB.
    public var maximumDecodedSize: Int

    public init(
        allowXcode: Bool = false, requireAppleMarkerOIDs: Bool = true,
        maximumDecodedSize: Int = ReceiptInput.defaultMaximumDecodedSize
    ) {
        self.allowXcode = allowXcode
        self.requireAppleMarkerOIDs = requireAppleMarkerOIDs
        self.maximumDecodedSize = maximumDecodedSize
    }
}
