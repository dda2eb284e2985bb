import Crypto
import Foundation
import _CryptoExtras

/// A Google Cloud service account's key file: the identity the Developer API client signs its token requests with.
///
/// Read from Google's JSON (`type` "service_account", `client_email`, `private_key`, `private_key_id`, `token_uri`).
/// Its description names the account's e-mail only, never the key.
public struct GooglePlayServiceAccount: Sendable, CustomStringConvertible {
    /// `client_email`: the assertion's issuer.
    public let clientEmail: String
    /// `private_key_id`: the assertion's `kid`.
    public let privateKeyID: String
    /// `token_uri`, when the file names one.
    public let tokenURI: String?
    /// The RSA key that signs the assertion.
    let privateKey: _RSA.Signing.PrivateKey

    /// Reads a key file; a file that is not a service account's key is a ``GooglePlayServiceAccountError``.
    public init(contentsOfFile path: String) throws(GooglePlayServiceAccountError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw GooglePlayServiceAccountError("the service-account file \(path) cannot be read")
        }
        try self.init(json: data, source: path)
    }

    /// Reads a key file's JSON; `source` names it in errors.
    public init(json: Data, source: String = "the service-account JSON") throws(GooglePlayServiceAccountError) {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw GooglePlayServiceAccountError("\(source) is not a JSON object")
        }
        guard object["type"] as? String == "service_account" else {
            throw GooglePlayServiceAccountError(
                "\(source) is not a service-account key (its type is not service_account)")
        }
        func field(_ name: String) throws(GooglePlayServiceAccountError) -> String {
            guard let value = object[name] as? String, value.isEmpty == false else {
                throw GooglePlayServiceAccountError("\(source) has no \(name)")
            }
            return value
        }
        clientEmail = try field("client_email")
        privateKeyID = try field("private_key_id")
        let pem = try field("private_key")
        tokenURI = object["token_uri"] as? String
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw GooglePlayServiceAccountError("\(source): private_key is not an RSA private key of 2048 bits or more")
        }
    }

    /// Creates an account from its parts (tests, and callers that keep the key elsewhere).
    public init(
        clientEmail: String, privateKeyID: String, privateKeyPEM: String, tokenURI: String? = nil
    ) throws(GooglePlayServiceAccountError) {
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw GooglePlayServiceAccountError("private_key is not an RSA private key of 2048 bits or more")
        }
    }

    /// The assertion Google's token endpoint exchanges for an access token: a JWT signed RS256, header `kid` the key
    /// id, claims `iss` the account, `scope` androidpublisher, `aud` the token URL, `iat` and `exp` an hour later.
    public func assertion(audience: String, issuedAt: Date, lifetime: Duration = .seconds(3600)) throws -> String {
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let header: [String: Any] = ["alg": "RS256", "typ": "JWT", "kid": privateKeyID]
        let claims: [String: Any] = [
            "iss": clientEmail, "scope": Self.scope, "aud": audience, "iat": iat,
            "exp": iat + min(lifetime.components.seconds, 3600),
        ]
        let encode = { (object: [String: Any]) throws -> String in
            Self.base64URL(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
        }
        let signingInput = try encode(header) + "." + encode(claims)
        let signature = try privateKey.signature(
            for: SHA256.hash(data: Data(signingInput.utf8)), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Self.base64URL(signature.rawRepresentation)
    }

    /// The OAuth scope of the Google Play Developer API.
    public static let scope = "https://www.googleapis.com/auth/androidpublisher"

    public var description: String { "service account \(clientEmail)" }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A service-account key file that cannot be used: one line that says which file and what is wrong, never a key.
public struct GooglePlayServiceAccountError: Error, Sendable, CustomStringConvertible {
    /// What is wrong, naming the file.
    public var problem: String

    init(_ problem: String) { self.problem = problem }

    public var description: String { "Google Play service account: \(problem)" }
}
