import Crypto
import Foundation
import Gateway
import Messages
import Synchronization
import _CryptoExtras

/// A test signer of Pub/Sub push tokens: its own RSA keys, published as a JWK set, and JWTs with Google's claims.
enum PubSubTestSigner {
    static let audience = "https://gateway.example.com/google-play/notifications"
    static let serviceAccount = "rtdn-push@example-project.iam.gserviceaccount.com"
    /// Generated once: RSA keys are slow in debug builds.
    static let keys = Result { () throws -> [String: _RSA.Signing.PrivateKey] in
        ["k1": try _RSA.Signing.PrivateKey(keySize: .bits2048), "k2": try _RSA.Signing.PrivateKey(keySize: .bits2048)]
    }

    /// The JWK set of `kids`, as Google publishes its keys.
    static func jwks(_ kids: [String] = ["k1"]) throws -> [UInt8] {
        let keys = try Self.keys.get()
        let entries: [[String: String]] = try kids.map { kid in
            let primitives = try keys[kid]!.publicKey.getKeyPrimitives()
            return [
                "kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
                "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent),
            ]
        }
        return Array(try JSONSerialization.data(withJSONObject: ["keys": entries], options: [.sortedKeys]))
    }

    /// Google's claims for a token issued at `now`, valid an hour.
    static func claims(now: Date) -> [String: Any] {
        let at = Int(now.timeIntervalSince1970)
        return [
            "iss": "https://accounts.google.com", "aud": audience, "email": serviceAccount, "email_verified": true,
            "iat": at, "exp": at + 3600, "sub": "1234567890",
        ]
    }

    /// A JWT of `claims` with `header`, signed RS256 by `kid`'s key (or `signWith`'s).
    static func token(
        claims: [String: Any], header: [String: Any] = ["alg": "RS256", "kid": "k1", "typ": "JWT"],
        signWith: String? = nil
    ) throws -> String {
        let headerPart = Base64URL.encode(try JSONSerialization.data(withJSONObject: header))
        let claimsPart = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims))
        let signingInput = Array("\(headerPart).\(claimsPart)".utf8)
        let kid = signWith ?? (header["kid"] as? String) ?? "k1"
        let key = try keys.get()[kid] ?? keys.get()["k1"]!
        let signature = try key.signature(for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5)
        return "\(headerPart).\(claimsPart).\(Base64URL.encode(signature.rawRepresentation))"
    }

    /// The `Authorization` header of a valid token at `now`.
    static func authorization(now: Date = Date()) throws -> String {
        "Bearer " + (try token(claims: claims(now: now)))
    }

    /// A Pub/Sub push envelope of `notification` (a DeveloperNotification JSON text).
    static func envelope(
        _ notification: String, messageID: String = "136969346945",
        subscription: String = "projects/p/subscriptions/rtdn"
    ) -> [String: Any] {
        [
            "message": [
                "data": Data(notification.utf8).base64EncodedString(), "messageId": messageID,
                "message_id": messageID, "publishTime": "2026-11-29T12:00:00.000Z",
                "publish_time": "2026-11-29T12:00:00.000Z", "attributes": [String: String](),
            ],
            "subscription": subscription,
        ]
    }

    static func subscriptionNotification(token: String = "tok-1", package: String = "com.example.app") -> String {
        #"{"version":"1.0","packageName":"\#(package)","eventTimeMillis":"1795000000000","subscriptionNotification":{"version":"1.0","notificationType":2,"purchaseToken":"\#(token)"}}"#
    }
}

/// A clock tests move by hand.
final class PubSubTestDate: Sendable {
    private let value: Mutex<Date>
    init(_ start: Date) { value = Mutex(start) }
    var now: Date { value.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
}
