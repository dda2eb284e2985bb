import CodedErrors
import Crypto
import Foundation
import Messages
import Synchronization
import _CryptoExtras

/// A service account the simulator issued: Google's key file (`type` `service_account`) with a fresh RSA-2048 key,
/// and the packages it may read (empty: every package, as an account granted access to the whole developer account).
public struct PlayServiceAccount: Sendable {
    public let clientEmail: String
    /// 21 digits, as Google's.
    public let clientId: String
    public let privateKeyId: String
    public let privateKey: _RSA.Signing.PrivateKey
    public let tokenURI: String
    public let packages: Set<String>

    /// Google's service-account key file, as the Cloud console downloads it.
    public func keyFileJSON() -> Data {
        let object: [String: Any] = [
            "type": "service_account",
            "project_id": "play-simulator",
            "private_key_id": privateKeyId,
            "private_key": privateKey.pkcs8PEMRepresentation + "\n",
            "client_email": clientEmail,
            "client_id": clientId,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": tokenURI,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/"
                + (clientEmail.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? clientEmail),
            "universe_domain": "googleapis.com",
        ]
        return
            (try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? Data()
    }

    /// Writes the key file (mode 0600: it holds a private key).
    public func writeKeyFile(to url: URL) throws {
        guard
            FileManager.default.createFile(
                atPath: url.path, contents: keyFileJSON(), attributes: [.posixPermissions: 0o600])
        else {
            throw PlaySimulatorError(.server, "cannot write the service-account key file \(url.path)")
        }
    }
}

/// Google's OAuth 2.0 token endpoint for service accounts (`POST /token`, the JWT bearer grant of RFC 7523) and the
/// access tokens it hands out, which the API routes check.
final class PlayOAuthService: Sendable {
    /// The scope the Android Publisher API needs.
    static let scope = "https://www.googleapis.com/auth/androidpublisher"
    /// Google's token URL: an assertion may name it as its audience as well as the key file's `token_uri`.
    static let googleTokenURI = "https://oauth2.googleapis.com/token"
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Google's limit on an assertion's lifetime (`exp` - `iat`).
    static let maximumAssertionLifetime: TimeInterval = 3600
    /// How far ahead of the simulator's clock an assertion's `iat` may be (clocks drift).
    static let allowedClockSkew: TimeInterval = 300

    private struct State {
        var accounts: [String: PlayServiceAccount] = [:]
        var tokens: [String: (clientEmail: String, expiresAt: Date)] = [:]
    }

    private let state = Mutex(State())
    private let clock: PlaySimulatorClock
    private let accessTokenLifetime: TimeInterval

    init(clock: PlaySimulatorClock, accessTokenLifetime: TimeInterval) {
        self.clock = clock
        self.accessTokenLifetime = accessTokenLifetime
    }

    /// Issues an account with a fresh RSA-2048 key (or `key`, to spare a test the key generation).
    func issue(
        clientEmail: String?, packages: Set<String>, tokenURI: String, key: _RSA.Signing.PrivateKey?
    ) throws -> PlayServiceAccount {
        let keyId = Self.hex(count: 20)
        let email = clientEmail ?? "verifier-\(Self.hex(count: 4))@play-simulator.iam.gserviceaccount.com"
        guard email.contains("@"), email.utf8.count <= 200 else {
            throw PlaySimulatorError(.invalidRequest, "client_email must be an address of at most 200 bytes")
        }
        let account = PlayServiceAccount(
            clientEmail: email, clientId: "1" + String((0..<20).map { _ in "0123456789".randomElement()! }),
            privateKeyId: keyId, privateKey: try key ?? .init(keySize: .bits2048),
            tokenURI: tokenURI, packages: packages)
        state.withLock { $0.accounts[email] = account }
        return account
    }

    /// The answer to `POST /token`: HTTP status and Google's JSON.
    func tokenAnswer(formBody: [UInt8]) -> (status: Int, body: [String: Any]) {
        let form = Self.form(formBody)
        guard let grant = form["grant_type"] else {
            return (400, ["error": "invalid_request", "error_description": "Missing required parameter: grant_type"])
        }
        guard grant == Self.grantType else {
            return (
                400,
                ["error": "unsupported_grant_type", "error_description": "Invalid grant_type: \(grant.prefix(60))"]
            )
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return (400, ["error": "invalid_request", "error_description": "Missing required parameter: assertion"])
        }
        switch check(assertion: assertion) {
        case .failure(let refusal):
            return (refusal.status, ["error": refusal.error, "error_description": refusal.text])
        case .success(let email):
            let token = "ya29.c." + Base64URL.encode(Data((0..<96).map { _ in UInt8.random(in: 0...255) }))
            let expiresAt = clock.now().addingTimeInterval(accessTokenLifetime)
            state.withLock { $0.tokens[token] = (email, expiresAt) }
            return (200, ["access_token": token, "expires_in": Int(accessTokenLifetime), "token_type": "Bearer"])
        }
    }

    struct Refusal: Error {
        var status = 400
        var error = "invalid_grant"
        var text: String
    }

    /// Checks an assertion as Google does: RS256 by a key the simulator issued (`kid`), `iss` an issued account,
    /// `aud` the token URI, `scope` the Android Publisher scope, `iat`/`exp` a lifetime of at most an hour around now.
    func check(assertion: String) -> Result<String, Refusal> {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any]
        else { return .failure(Refusal(text: "Invalid JWT: the assertion is not a signed JWT.")) }
        guard header["alg"] as? String == "RS256" else {
            return .failure(Refusal(text: "Invalid JWT Signature."))
        }
        guard let issuer = claims["iss"] as? String, let account = state.withLock({ $0.accounts[issuer] }) else {
            return .failure(Refusal(text: "Invalid grant: account not found"))
        }
        // Google looks the key up by `kid`; a key it does not hold for the account cannot verify the signature.
        if let keyId = header["kid"] as? String, keyId != account.privateKeyId {
            return .failure(Refusal(text: "Invalid JWT Signature."))
        }
        let signed = Data("\(parts[0]).\(parts[1])".utf8)
        guard
            account.privateKey.publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signed),
                padding: .insecurePKCS1v1_5)
        else { return .failure(Refusal(text: "Invalid JWT Signature.")) }
        guard let audience = claims["aud"] as? String, audience == account.tokenURI || audience == Self.googleTokenURI
        else { return .failure(Refusal(text: "Invalid JWT: Failed audience check.")) }
        let scopes = (claims["scope"] as? String)?.split(separator: " ").map(String.init) ?? []
        guard scopes.contains(Self.scope) else {
            return .failure(
                Refusal(error: "invalid_scope", text: "Invalid OAuth scope or ID token audience provided."))
        }
        let now = clock.now().timeIntervalSince1970
        guard let iat = Self.seconds(claims["iat"]), let exp = Self.seconds(claims["exp"]), exp > iat,
            exp - iat <= Self.maximumAssertionLifetime, iat <= now + Self.allowedClockSkew, exp > now
        else {
            return .failure(
                Refusal(
                    text: "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
                        + "Check your iat and exp values in the JWT claim."))
        }
        return .success(account.clientEmail)
    }

    enum BearerCheck: Equatable {
        case valid(clientEmail: String)
        /// Missing, unknown or expired: Google's 401.
        case unauthenticated
        /// A valid token of an account without access to the package: Google's 401 `permissionDenied`.
        case permissionDenied
    }

    /// Checks an `Authorization` header for an API call about `packageName`.
    func checkBearer(_ authorization: String?, packageName: String) -> BearerCheck {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return .unauthenticated }
        let token = String(authorization.dropFirst("Bearer ".count))
        let now = clock.now()
        return state.withLock { state in
            guard let entry = state.tokens[token] else { return .unauthenticated }
            guard entry.expiresAt > now else {
                state.tokens[token] = nil
                return .unauthenticated
            }
            if let account = state.accounts[entry.clientEmail], !account.packages.isEmpty,
                !account.packages.contains(packageName)
            {
                return .permissionDenied
            }
            return .valid(clientEmail: entry.clientEmail)
        }
    }

    /// Expires the access token an `Authorization` header carries (the `expired_token` fault).
    func expire(_ authorization: String?) {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return }
        let token = String(authorization.dropFirst("Bearer ".count))
        state.withLock { $0.tokens[token] = nil }
    }

    static func form(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    static func seconds(_ raw: Any?) -> Double? {
        switch raw {
        case let number as Int: return Double(number)
        case let number as Double where number.isFinite: return number
        default: return nil
        }
    }

    static func hex(count: Int) -> String {
        (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}
