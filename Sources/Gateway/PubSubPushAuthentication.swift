import Crypto
import Foundation
import Messages
import Synchronization
import _CryptoExtras

/// Checks the OIDC token a Cloud Pub/Sub push subscription sends (`Authorization: Bearer <JWT>`): an RS256 JWT signed
/// by one of Google's keys (a JWK set), issued by Google for the configured audience and service account, not expired
/// and not issued in the future (both within a small clock skew).
///
/// Only RS256 is accepted, whatever the token's header says: a token that names `none` or an HMAC algorithm is
/// refused before any key is looked up, so a public key can never be used as an HMAC secret. Each refusal names the
/// check that failed, never the token.
public struct PubSubTokenVerifier: Sendable {
    /// The issuers Google's OIDC tokens carry.
    public static let issuers: Set<String> = ["accounts.google.com", "https://accounts.google.com"]

    let keys: PubSubKeySet
    /// The `aud` the push subscription was configured with.
    let audience: String
    /// The email of the service account the push subscription authenticates as.
    let serviceAccount: String
    /// How far `exp` may be passed and `iat` lie ahead.
    let clockSkew: Duration
    let now: @Sendable () -> Date

    public init(
        keys: PubSubKeySet, audience: String, serviceAccount: String, clockSkew: Duration = .seconds(60),
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.keys = keys
        self.audience = audience
        self.serviceAccount = serviceAccount
        self.clockSkew = clockSkew
        self.now = now
    }

    /// Why a push was not authenticated: the check that failed (answered 401 `unauthenticated`).
    public enum Failure: String, Error, Sendable, CaseIterable {
        case noAuthorization = "no Authorization header"
        case notBearer = "Authorization is not a Bearer token"
        case notJWT = "the token is not a JWT"
        case algorithm = "the token's alg is not RS256"
        case unknownKey = "the token's kid is not in the JWK set"
        case signature = "the token's signature does not verify"
        case issuer = "the token's iss is not Google's"
        case audience = "the token's aud is not the configured audience"
        case email = "the token's email is not the configured service account"
        case emailNotVerified = "the token's email_verified is not true"
        case expired = "the token has expired"
        case issuedInFuture = "the token's iat is in the future"
    }

    /// Checks the `Authorization` header's token. Throws ``Failure`` for a token refused, ``PubSubKeySet/Unavailable``
    /// when the key set could not be read at all (no key known yet and Google's keys unreachable).
    public func verify(authorization: String?) async throws -> Void {
        guard let authorization else { throw Failure.noAuthorization }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw Failure.notBearer }
        let segments = parts[1].trimmingCharacters(in: .whitespaces).split(
            separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3,
            let headerBytes = Base64URL.decode(segments[0]),
            let payloadBytes = Base64URL.decode(segments[1]),
            let signature = Base64URL.decode(segments[2]), !signature.isEmpty,
            let header = (try? JSONSerialization.jsonObject(with: headerBytes)) as? [String: Any],
            let claims = try? JSONDecoder().decode(Claims.self, from: payloadBytes)
        else { throw Failure.notJWT }
        guard header["alg"] as? String == "RS256" else { throw Failure.algorithm }
        guard let kid = header["kid"] as? String, let key = try await keys.key(id: kid) else {
            throw Failure.unknownKey
        }
        let signedBytes = Array("\(segments[0]).\(segments[1])".utf8)
        guard
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signedBytes),
                padding: .insecurePKCS1v1_5)
        else { throw Failure.signature }
        guard let issuer = claims.iss, Self.issuers.contains(issuer) else { throw Failure.issuer }
        guard claims.aud.contains(audience) else { throw Failure.audience }
        guard claims.email == serviceAccount else { throw Failure.email }
        guard claims.emailVerified else { throw Failure.emailNotVerified }
        let at = now().timeIntervalSince1970
        let skew = Double(clockSkew.components.seconds)
        guard let expiry = claims.exp, at <= expiry + skew else { throw Failure.expired }
        guard let issued = claims.iat, issued <= at + skew else { throw Failure.issuedInFuture }
    }

    /// The claims read, each nil when absent or not of its JSON type (a wrong type fails its check).
    struct Claims: Decodable {
        var iss: String?
        var aud: [String]
        var email: String?
        var emailVerified: Bool
        var exp: Double?
        var iat: Double?

        enum CodingKeys: String, CodingKey {
            case iss, aud, email, exp, iat
            case emailVerified = "email_verified"
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            iss = try? c.decodeIfPresent(String.self, forKey: .iss)
            if let one = try? c.decodeIfPresent(String.self, forKey: .aud) {
                aud = [one]
            } else {
                aud = (try? c.decodeIfPresent([String].self, forKey: .aud)) ?? []
            }
            email = try? c.decodeIfPresent(String.self, forKey: .email)
            // A JSON true; a number or any other string is not.
            if let flag = try? c.decode(Bool.self, forKey: .emailVerified) {
                emailVerified = flag
            } else {
                emailVerified = (try? c.decode(String.self, forKey: .emailVerified)) == "true"
            }
            exp = try? c.decodeIfPresent(Double.self, forKey: .exp)
            iat = try? c.decodeIfPresent(Double.self, forKey: .iat)
        }
    }
}

/// The RSA keys Google signs push tokens with: a JWK set from a file (read once, at start) or from a URL (Google's
/// `https://www.googleapis.com/oauth2/v3/certs`, fetched over the project's libcurl client with TLS verified).
///
/// A URL's set is fetched again once its `Cache-Control: max-age` has passed (default 300 s when it gives none), and
/// when a token names a `kid` the set does not hold, at most once a minute: Google rotates its keys, and a forged
/// `kid` must not make the gateway fetch on every request. While a fetch fails, the keys known keep serving.
public final class PubSubKeySet: Sendable {
    /// Where the keys come from.
    public enum Source: Sendable {
        /// A JWK set already read (a file's).
        case keys([String: _RSA.Signing.PublicKey])
        /// A URL, fetched with `fetch` (GET; answers the status, the `Cache-Control` header and the body).
        case url(String, fetch: @Sendable (String) async throws -> (status: Int, cacheControl: String?, body: [UInt8]))
    }

    /// No key could be had: the set was never read (answered 503, so Pub/Sub delivers again).
    public struct Unavailable: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// How long a set without `max-age` is kept.
    public static let defaultMaximumAge: Duration = .seconds(300)
    /// The least time between two fetches for an unknown `kid`.
    public static let unknownKeyInterval: Duration = .seconds(60)

    private struct State {
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        var fetched = false
        var expiresAt = Date.distantPast
        var lastUnknownKeyFetch = Date.distantPast
        /// A fetch for an expired set is under way: other requests use the set they have meanwhile, so an expiry
        /// makes one fetch, not one per request in flight.
        var refreshing = false
    }

    private let source: Source
    private let now: @Sendable () -> Date
    private let state = Mutex(State())

    public init(source: Source, now: @escaping @Sendable () -> Date = Date.init) {
        self.source = source
        self.now = now
        if case .keys(let keys) = source {
            state.withLock {
                $0.keys = keys
                $0.fetched = true
                $0.expiresAt = .distantFuture
            }
        }
    }

    /// The key `id`, fetching the set again when its age has passed, or when `id` is unknown and no such fetch was
    /// made within the last minute. nil when the set does not hold it.
    func key(id: String) async throws -> _RSA.Signing.PublicKey? {
        guard case .url(let url, let fetch) = source else { return state.withLock { $0.keys[id] } }
        let at = now()
        enum Action { case use(_RSA.Signing.PublicKey?), fetch }
        let action: Action = state.withLock { state in
            if state.fetched, at >= state.expiresAt, state.refreshing { return .use(state.keys[id]) }
            if state.fetched, at < state.expiresAt {
                if let key = state.keys[id] { return .use(key) }
                guard at.timeIntervalSince(state.lastUnknownKeyFetch) >= Self.seconds(Self.unknownKeyInterval) else {
                    return .use(nil)
                }
                state.lastUnknownKeyFetch = at
            } else if state.fetched {
                state.refreshing = true
            }
            return .fetch
        }
        if case .use(let key) = action { return key }
        defer { state.withLock { $0.refreshing = false } }
        do {
            let answer = try await fetch(url)
            guard answer.status == 200 else {
                throw Unavailable(description: "the JWK set URL answered \(answer.status)")
            }
            let keys = try Self.parse(answer.body)
            let age = Self.maximumAge(cacheControl: answer.cacheControl) ?? Self.defaultMaximumAge
            return state.withLock { state in
                state.keys = keys
                state.fetched = true
                state.expiresAt = at.addingTimeInterval(Self.seconds(age))
                return keys[id]
            }
        } catch {
            let known: (Bool, _RSA.Signing.PublicKey?) = state.withLock { ($0.fetched, $0.keys[id]) }
            guard known.0 else { throw Unavailable(description: "the JWK set could not be fetched") }
            return known.1
        }
    }

    /// The RSA keys of a JWK set (`{"keys":[{"kty":"RSA","kid":…,"n":…,"e":…}]}`), by `kid`; keys of other types
    /// are skipped. Throws when the text is no JWK set or holds no RSA key with a `kid`.
    public static func parse(_ bytes: [UInt8]) throws -> [String: _RSA.Signing.PublicKey] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any],
            let entries = object["keys"] as? [[String: Any]]
        else { throw Unavailable(description: "not a JWK set (a JSON object with keys)") }
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for entry in entries where entry["kty"] as? String == "RSA" {
            guard let kid = entry["kid"] as? String, let n = (entry["n"] as? String).flatMap(Base64URL.decode),
                let e = (entry["e"] as? String).flatMap(Base64URL.decode),
                let key = try? _RSA.Signing.PublicKey(n: n, e: e)
            else { continue }
            keys[kid] = key
        }
        guard !keys.isEmpty else { throw Unavailable(description: "the JWK set holds no RSA key with a kid") }
        return keys
    }

    /// `max-age` of a `Cache-Control` header, if it gives one.
    public static func maximumAge(cacheControl: String?) -> Duration? {
        guard let cacheControl else { return nil }
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = Int(parts[1]), seconds >= 0 {
                return .seconds(seconds)
            }
        }
        return nil
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
