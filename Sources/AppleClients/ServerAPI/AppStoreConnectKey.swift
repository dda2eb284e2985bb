import Crypto
import Foundation
import Messages
import Synchronization

/// An App Store Connect API key (`.p8`) and the identifiers that go with it. Its description is redacted.
public struct AppStoreConnectKey: Sendable, CustomStringConvertible, CustomReflectable {
    /// The key id (`kid`), from App Store Connect.
    public var keyID: String
    /// The issuer id (`iss`), from App Store Connect.
    public var issuerID: String
    /// The app's bundle id (`bid`).
    public var bundleID: String
    let privateKey: P256.Signing.PrivateKey

    /// Reads a PEM PKCS#8 P-256 key, as App Store Connect delivers it.
    public init(keyID: String, issuerID: String, bundleID: String, privateKeyPEM: String) throws {
        do {
            self.privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw AppleClientError(code: .invalidRequest, detail: "the App Store Connect key is not a PEM P-256 key")
        }
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
    }

    /// Uses an existing key.
    public init(keyID: String, issuerID: String, bundleID: String, privateKey: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
        self.privateKey = privateKey
    }

    public var description: String { "AppStoreConnectKey(kid: \(keyID), bid: \(bundleID), key: <redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: ["keyID": keyID, "bundleID": bundleID]) }
}

/// Makes the ES256 bearer token of the App Store Server API and reuses it until shortly before it expires,
/// instead of signing once per call.
public final class AppStoreTokenSigner: Sendable {
    private let key: AppStoreConnectKey
    private let lifetime: Duration
    private let refreshMargin: Duration
    private let now: @Sendable () -> Date
    private let cached: Mutex<(token: String, renewAfter: Date)?> = Mutex(nil)
    private let signed = Atomic<Int>(0)

    /// Creates a signer. Apple accepts at most 60 minutes of lifetime.
    /// - Parameters:
    ///   - lifetime: `exp - iat`. Default: 5 minutes.
    ///   - refreshMargin: a new token is signed this long before the current one expires. Default: 60 s.
    ///   - now: the wall clock (injected in tests).
    public init(
        key: AppStoreConnectKey, lifetime: Duration = .seconds(300), refreshMargin: Duration = .seconds(60),
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.key = key
        self.lifetime = lifetime
        self.refreshMargin = min(refreshMargin, lifetime / 2)
        self.now = now
    }

    /// How many tokens were signed so far.
    public var tokensSigned: Int { signed.load(ordering: .relaxed) }

    /// The current token, signed anew only when the cached one is near expiry.
    public func token() throws -> String {
        let now = now()
        return try cached.withLock { cached in
            if let cached, now < cached.renewAfter { return cached.token }
            let token = try sign(issuedAt: now)
            let lifetimeSeconds = Double(lifetime.components.seconds)
            let marginSeconds = Double(refreshMargin.components.seconds)
            cached = (token, now.addingTimeInterval(lifetimeSeconds - marginSeconds))
            signed.add(1, ordering: .relaxed)
            return token
        }
    }

    private func sign(issuedAt: Date) throws -> String {
        struct Header: Encodable {
            var alg = "ES256"
            var kid: String
            var typ = "JWT"
        }
        struct Claims: Encodable {
            var iss: String
            var iat: Int64
            var exp: Int64
            var aud = "appstoreconnect-v1"
            var bid: String
        }
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(Header(kid: key.keyID))
        let claims = try encoder.encode(
            Claims(iss: key.issuerID, iat: iat, exp: iat + lifetime.components.seconds, bid: key.bundleID))
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try key.privateKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
