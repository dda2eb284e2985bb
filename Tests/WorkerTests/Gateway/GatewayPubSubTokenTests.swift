import Foundation
import Gateway
import Synchronization
import Testing

/// The OIDC token check of Google Play pushes (``PubSubTokenVerifier``) and its key set (``PubSubKeySet``): each check
/// failing in turn, the clock-skew edges, and the key set fetched again on its max-age and on an unknown kid.
@Suite("Gateway: Pub/Sub push tokens", .timeLimit(.minutes(2)))
struct GatewayPubSubTokenTests {
    static let start = Date(timeIntervalSince1970: 1_795_000_000)

    static func verifier(
        clock: PubSubTestDate = PubSubTestDate(start), keys: PubSubKeySet? = nil
    ) throws -> PubSubTokenVerifier {
        let set = try keys ?? PubSubKeySet(source: .keys(PubSubKeySet.parse(PubSubTestSigner.jwks(["k1"]))))
        return PubSubTokenVerifier(
            keys: set, audience: PubSubTestSigner.audience, serviceAccount: PubSubTestSigner.serviceAccount,
            clockSkew: .seconds(60), now: { clock.now })
    }

    /// The failure of `authorization`, nil when accepted.
    static func failure(
        _ authorization: String?, clock: PubSubTestDate = PubSubTestDate(start)
    ) async throws
        -> PubSubTokenVerifier.Failure?
    {
        do {
            try await verifier(clock: clock).verify(authorization: authorization)
            return nil
        } catch let failure as PubSubTokenVerifier.Failure {
            return failure
        }
    }

    static func token(_ change: (inout [String: Any]) -> Void) throws -> String {
        var claims = PubSubTestSigner.claims(now: start)
        change(&claims)
        return "Bearer " + (try PubSubTestSigner.token(claims: claims))
    }

    @Test("a token with Google's claims, signed by a key of the set, passes")
    func valid() async throws {
        #expect(try await Self.failure(try Self.token { _ in }) == nil)
        #expect(try await Self.failure(try Self.token { $0["iss"] = "accounts.google.com" }) == nil)
        #expect(try await Self.failure(try Self.token { $0["aud"] = [PubSubTestSigner.audience, "other"] }) == nil)
        #expect(
            try await Self.failure(
                "bearer " + (try PubSubTestSigner.token(claims: PubSubTestSigner.claims(now: Self.start)))) == nil)
    }

    @Test("each check failing in turn is refused, naming that check")
    func eachCheck() async throws {
        let claims = PubSubTestSigner.claims(now: Self.start)
        let good = try PubSubTestSigner.token(claims: claims)
        let parts = good.split(separator: ".").map(String.init)
        func header(_ object: [String: Any]) throws -> String {
            Base64URLTestEncoding.encode(try JSONSerialization.data(withJSONObject: object))
        }
        let cases: [(String?, PubSubTokenVerifier.Failure)] = [
            (nil, .noAuthorization),
            ("Basic dXNlcjpwYXNz", .notBearer),
            ("Bearer", .notBearer),
            ("Bearer not-a-jwt", .notJWT),
            ("Bearer a.b", .notJWT),
            ("Bearer \(parts[0]).\(parts[1]).", .notJWT),
            ("Bearer \(try header(["alg": "none", "kid": "k1"])).\(parts[1]).\(parts[2])", .algorithm),
            ("Bearer \(try header(["alg": "HS256", "kid": "k1"])).\(parts[1]).\(parts[2])", .algorithm),
            ("Bearer \(try header(["kid": "k1"])).\(parts[1]).\(parts[2])", .algorithm),
            (
                "Bearer " + (try PubSubTestSigner.token(claims: claims, header: ["alg": "RS256", "kid": "k9"])),
                .unknownKey
            ),
            ("Bearer " + (try PubSubTestSigner.token(claims: claims, header: ["alg": "RS256"])), .unknownKey),
            (
                "Bearer "
                    + (try PubSubTestSigner.token(
                        claims: claims, header: ["alg": "RS256", "kid": "k1"], signWith: "k2")),
                .signature
            ),
            (
                "Bearer \(parts[0]).\(try header(["iss": "https://accounts.google.com", "aud": "x"])).\(parts[2])",
                .signature
            ),
            (try Self.token { $0["iss"] = "https://evil.example.com" }, .issuer),
            (try Self.token { $0["iss"] = nil }, .issuer),
            (try Self.token { $0["aud"] = "https://other.example.com" }, .audience),
            (try Self.token { $0["email"] = "someone@example.com" }, .email),
            (try Self.token { $0["email_verified"] = false }, .emailNotVerified),
            (try Self.token { $0["email_verified"] = nil }, .emailNotVerified),
            (try Self.token { $0["email_verified"] = 1 }, .emailNotVerified),
            (try Self.token { $0["exp"] = Int(Self.start.timeIntervalSince1970) - 61 }, .expired),
            (try Self.token { $0["exp"] = nil }, .expired),
            (try Self.token { $0["iat"] = Int(Self.start.timeIntervalSince1970) + 61 }, .issuedInFuture),
            (try Self.token { $0["iat"] = nil }, .issuedInFuture),
        ]
        for (authorization, expected) in cases {
            #expect(try await Self.failure(authorization) == expected, "\(expected)")
        }
    }

    @Test("the clock skew: exp passed and iat ahead by exactly the skew pass, one second more does not")
    func skewEdges() async throws {
        let at = Int(Self.start.timeIntervalSince1970)
        #expect(try await Self.failure(try Self.token { $0["exp"] = at - 60 }) == nil)
        #expect(try await Self.failure(try Self.token { $0["exp"] = at - 61 }) == .expired)
        #expect(try await Self.failure(try Self.token { $0["iat"] = at + 60 }) == nil)
        #expect(try await Self.failure(try Self.token { $0["iat"] = at + 61 }) == .issuedInFuture)
        // The same token, once its hour and the skew have passed.
        let clock = PubSubTestDate(Self.start)
        let token = try Self.token { _ in }
        clock.advance(3600 + 60)
        #expect(try await Self.failure(token, clock: clock) == nil)
        clock.advance(1)
        #expect(try await Self.failure(token, clock: clock) == .expired)
    }

    /// A key set URL served by a closure: counts fetches, answers what `answer` holds.
    final class KeyServer: Sendable {
        let answer: Mutex<(status: Int, cacheControl: String?, body: [UInt8])>
        let count = Atomic<Int>(0)
        init(_ body: [UInt8], cacheControl: String? = "public, max-age=300") {
            answer = Mutex((200, cacheControl, body))
        }
        func fetch(_ url: String) async throws -> (status: Int, cacheControl: String?, body: [UInt8]) {
            count.add(1, ordering: .relaxed)
            return answer.withLock { $0 }
        }
    }

    @Test("the URL's set is fetched again once its max-age has passed (injected clock), not before")
    func refreshOnMaxAge() async throws {
        let clock = PubSubTestDate(Self.start)
        let server = KeyServer(try PubSubTestSigner.jwks(["k1"]))
        let keys = PubSubKeySet(source: .url("https://keys.example/certs", fetch: server.fetch), now: { clock.now })
        let verifier = try Self.verifier(clock: clock, keys: keys)
        try await verifier.verify(authorization: try PubSubTestSigner.authorization(now: clock.now))
        try await verifier.verify(authorization: try PubSubTestSigner.authorization(now: clock.now))
        #expect(server.count.load(ordering: .relaxed) == 1)
        clock.advance(299)
        try await verifier.verify(authorization: try PubSubTestSigner.authorization(now: clock.now))
        #expect(server.count.load(ordering: .relaxed) == 1)
        // Google rotated: after the max-age the new set is read, and a token of the new key passes.
        server.answer.withLock { $0.body = try! PubSubTestSigner.jwks(["k2"]) }
        clock.advance(1)
        let rotated = try PubSubTestSigner.token(
            claims: PubSubTestSigner.claims(now: clock.now), header: ["alg": "RS256", "kid": "k2"])
        try await verifier.verify(authorization: "Bearer " + rotated)
        #expect(server.count.load(ordering: .relaxed) == 2)
        #expect(PubSubKeySet.maximumAge(cacheControl: "public, max-age=19000, must-revalidate") == .seconds(19000))
        #expect(PubSubKeySet.maximumAge(cacheControl: "no-cache") == nil)
    }

    @Test("an unknown kid fetches the set again at once, then at most once a minute")
    func refreshOnUnknownKid() async throws {
        let clock = PubSubTestDate(Self.start)
        let server = KeyServer(try PubSubTestSigner.jwks(["k1"]), cacheControl: "max-age=86400")
        let keys = PubSubKeySet(source: .url("https://keys.example/certs", fetch: server.fetch), now: { clock.now })
        let verifier = try Self.verifier(clock: clock, keys: keys)
        try await verifier.verify(authorization: try PubSubTestSigner.authorization(now: clock.now))
        #expect(server.count.load(ordering: .relaxed) == 1)
        func k2() throws -> String {
            "Bearer "
                + (try PubSubTestSigner.token(
                    claims: PubSubTestSigner.claims(now: clock.now), header: ["alg": "RS256", "kid": "k2"]))
        }
        // k2 is not published yet: one fetch for it, then none for a minute, however many tokens name it.
        for _ in 0..<5 {
            await #expect(throws: PubSubTokenVerifier.Failure.unknownKey) {
                try await verifier.verify(authorization: try k2())
            }
        }
        #expect(server.count.load(ordering: .relaxed) == 2)
        server.answer.withLock { $0.body = try! PubSubTestSigner.jwks(["k1", "k2"]) }
        clock.advance(59)
        await #expect(throws: PubSubTokenVerifier.Failure.unknownKey) {
            try await verifier.verify(authorization: try k2())
        }
        #expect(server.count.load(ordering: .relaxed) == 2)
        clock.advance(1)
        try await verifier.verify(authorization: try k2())
        #expect(server.count.load(ordering: .relaxed) == 3)
        // A fetch that fails keeps the keys known serving.
        server.answer.withLock { $0.status = 500 }
        clock.advance(86_400)
        try await verifier.verify(authorization: try k2())
    }

    /// A key set URL whose fetches after the first wait until the test releases them, and say when they start.
    final class HeldKeyServer: Sendable {
        let body: [UInt8]
        let count = Atomic<Int>(0)
        let started = AsyncStream<Int>.makeStream()
        let release = AsyncStream<Void>.makeStream()
        init(_ body: [UInt8]) { self.body = body }
        func fetch(_ url: String) async throws -> (status: Int, cacheControl: String?, body: [UInt8]) {
            let number = count.add(1, ordering: .relaxed).newValue
            started.continuation.yield(number)
            if number > 1 {
                var iterator = release.stream.makeAsyncIterator()
                _ = await iterator.next()
            }
            return (200, "max-age=300", body)
        }
    }

    @Test("an expired set is fetched once however many requests arrive meanwhile; they use the set they have")
    func oneFetchPerExpiry() async throws {
        let clock = PubSubTestDate(Self.start)
        let server = HeldKeyServer(try PubSubTestSigner.jwks(["k1"]))
        let keys = PubSubKeySet(source: .url("https://keys.example/certs", fetch: server.fetch), now: { clock.now })
        let verifier = try Self.verifier(clock: clock, keys: keys)
        var started = server.started.stream.makeAsyncIterator()
        try await verifier.verify(authorization: try PubSubTestSigner.authorization(now: clock.now))
        #expect(await started.next() == 1)
        clock.advance(300)
        let authorization = try PubSubTestSigner.authorization(now: clock.now)
        let refreshing = Task { try await verifier.verify(authorization: authorization) }
        #expect(await started.next() == 2)
        // While that fetch is held, other requests pass with the keys known, without a fetch of their own.
        for _ in 0..<3 { try await verifier.verify(authorization: authorization) }
        #expect(server.count.load(ordering: .relaxed) == 2)
        server.release.continuation.yield()
        try await refreshing.value
        #expect(server.count.load(ordering: .relaxed) == 2)
    }

    @Test("a set never read is 'unavailable', not a refusal of the token")
    func neverRead() async throws {
        let server = KeyServer([], cacheControl: nil)
        server.answer.withLock { $0.status = 503 }
        let keys = PubSubKeySet(source: .url("https://keys.example/certs", fetch: server.fetch))
        let verifier = try Self.verifier(keys: keys)
        await #expect(throws: PubSubKeySet.Unavailable.self) {
            try await verifier.verify(authorization: try PubSubTestSigner.authorization(now: Self.start))
        }
    }

    @Test("what is not a JWK set of RSA keys is refused")
    func notAKeySet() {
        for text in ["", "[]", #"{"keys":"x"}"#, #"{"keys":[]}"#, #"{"keys":[{"kty":"EC","kid":"a","x":"AA"}]}"#] {
            #expect(throws: PubSubKeySet.Unavailable.self, "\(text)") { try PubSubKeySet.parse(Array(text.utf8)) }
        }
    }
}

/// Base64url without padding, for hand-made token parts.
enum Base64URLTestEncoding {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
