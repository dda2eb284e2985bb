import Foundation
import Receipts

/// Verifies the JWS the App Store Server API returns with the Receipts target's offline verifier (ES256, the `x5c`
/// chain to a configured anchor with Apple's marker OIDs, validated at `signedDate`) and, when a bundle id is given,
/// that the payload belongs to the app. Only then is the payload handed to the client.
public struct ReceiptsPayloadVerifier: SignedPayloadVerifier {
    /// Why a returned JWS was refused. The description names the check, never the payload.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    private let analyzer: ReceiptAnalyzer
    private let bundleID: String?

    /// - Parameters:
    ///   - analyzer: the worker's analyzer (its trust store and chain cache are shared with local analysis).
    ///   - bundleID: the app's bundle id; a payload of another app is refused. Nil skips the check.
    public init(analyzer: ReceiptAnalyzer, bundleID: String?) {
        self.analyzer = analyzer
        self.bundleID = bundleID
    }

    public func verifiedPayload(of jws: String) async throws -> [UInt8] {
        let analysis = analyzer.analyze(Array(jws.utf8))
        guard analysis.signature == .valid else {
            throw Refusal(
                description:
                    "signed payload not verified: \(analysis.signature.code) \(analysis.signature.reason ?? "")")
        }
        if let bundleID, let found = analysis.bundleID, found != bundleID {
            throw Refusal(description: "signed payload belongs to another app")
        }
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let payload = Base64.decode(segments[1].utf8) else {
            throw Refusal(description: "signed payload is not a compact JWS")
        }
        return payload
    }
}
