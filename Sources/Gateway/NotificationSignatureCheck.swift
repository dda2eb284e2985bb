import Foundation
import Messages
import Receipts

/// Checks an App Store Server Notification's JWS before it is published: ES256 signature, the `x5c` chain to a
/// trust anchor with Apple's marker extensions, valid at its `signedDate`, and the same for the JWS nested in it.
/// These are the worker's own checks (``ReceiptAnalyzer`` over the same trust anchors), so what the gateway lets
/// through the worker can verify; everything else about the notification (app, environment, what it changes) is
/// still the worker's to decide.
///
/// Without it, anyone who can reach `/apple/notifications` could post into the notification namespace and make
/// the workers spend a Kafka write and a verification on each post.
public struct NotificationSignatureCheck: Sendable {
    private let analyzer: ReceiptAnalyzer

    /// - Parameter trust: Apple's roots plus the configured extra anchors (`VERIFY_TRUST_ANCHORS`, as the worker).
    public init(trust: TrustStore) {
        // Every receipt's signature is checked: the gateway checks who signed, not what was bought. Xcode's
        // unanchored chains never pass.
        analyzer = ReceiptAnalyzer(trust: trust, policy: AnalysisPolicy(allowXcode: false))
    }

    /// Throws ``GatewayError`` `untrusted_signature` (403) unless `signedPayload` is a notification whose signature
    /// and chains verify; `invalid_value` (400) when it is not a notification at all.
    public func check(_ signedPayload: String) throws(GatewayError) {
        let analysis = analyzer.analyze(Array(signedPayload.utf8))
        guard analysis.format == .notification else {
            throw GatewayError(
                .invalidValue, field: "signedPayload", "signedPayload: not an App Store Server Notification JWS")
        }
        guard analysis.signature == .valid else {
            throw GatewayError(
                .untrustedSignature, field: "signedPayload",
                "signedPayload: signature not trusted (\(analysis.signature.code))")
        }
    }
}
