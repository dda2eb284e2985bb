/// Verifies a JWS that Apple returned (signature, `x5c` chain to the trusted roots, app and environment) and
/// hands back its payload. The Receipts target's verifier conforms to this; tests use a double.
public protocol SignedPayloadVerifier: Sendable {
    /// Returns the JSON payload of `jws` once it is verified, or throws why it is not trustworthy.
    func verifiedPayload(of jws: String) async throws -> [UInt8]
}
