import Crypto
import Foundation
import Hummingbird
import Logging
import Messages
import PlaySimulator
import Synchronization
import Testing
import _CryptoExtras

/// A push endpoint for the simulator's RTDN pushes: answers each POST with the next planned status (then the last
/// one again) and keeps every request's `Authorization` header and body.
final class PlayPushReceiver: Sendable {
    struct Received: Sendable {
        var authorization: String?
        var body: [UInt8]

        var envelope: [String: Any] {
            ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:]
        }
        var message: [String: Any] { envelope["message"] as? [String: Any] ?? [:] }
        /// The DeveloperNotification in `message.data`.
        var notification: [String: Any] {
            guard let data = (message["data"] as? String).flatMap({ Data(base64Encoded: $0) }) else { return [:] }
            return ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any]) ?? [:]
        }
        var bearer: String? {
            guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
            return String(authorization.dropFirst(7))
        }
    }

    private let plan: Mutex<[Int]>
    private let requests = Mutex<[Received]>([])
    private let arrival = AsyncStream<Received>.makeStream()

    private init(_ plan: [Int]) { self.plan = Mutex(plan) }

    /// Each request as it arrives (one consumer).
    var arrivals: AsyncStream<Received> { arrival.stream }

    var received: [Received] { requests.withLock { $0 } }

    /// Runs `body` with a receiver listening on 127.0.0.1.
    static func with<T>(
        statuses: [Int] = [204], _ body: (_ url: String, _ receiver: PlayPushReceiver) async throws -> T
    )
        async throws -> T
    {
        let receiver = PlayPushReceiver(statuses)
        let router = Router()
        router.post("push") { request, _ -> Response in
            var request = request
            let buffer = try await request.collectBody(upTo: 1 << 20)
            let received = Received(
                authorization: request.headers[.authorization],
                body: buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? [])
            receiver.requests.withLock { $0.append(received) }
            receiver.arrival.continuation.yield(received)
            let status = receiver.plan.withLock { $0.count > 1 ? $0.removeFirst() : $0.first ?? 204 }
            return Response(status: HTTPResponse.Status(code: status))
        }
        let ready = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "play-push-receiver")
        logger.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in ready.continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        let task = Task { try await app.runService() }
        defer { task.cancel() }
        var iterator = ready.stream.makeAsyncIterator()
        let port = try #require(await iterator.next())
        return try await body("http://127.0.0.1:\(port)/push", receiver)
    }
}

extension PlaySimHarness {
    /// A simulator on a manual clock pushing to a receiver (`statuses` planned), with the harness's shared keys.
    static func withPushes<T>(
        statuses: [Int] = [204], _ configure: @escaping (inout PlaySimulatorConfiguration) -> Void = { _ in },
        _ body: (PlaySimHarness, PlayPushReceiver) async throws -> T
    ) async throws -> T {
        try await PlayPushReceiver.with(statuses: statuses) { url, receiver in
            try await with({ configuration in
                configuration.accessTokenLifetime = 31_536_000
                configuration.push.endpoint = url
                configuration.push.signingKey = try? sharedKeys.get().serviceAccount
                configuration.push.strangerKey = try? sharedKeys.get().stranger
                configure(&configuration)
            }) { sim in try await body(sim, receiver) }
        }
    }

    /// Mints a subscription and acknowledges it (so that Google's three-day refund leaves it alone).
    func subscribe(product: String = "gold", extra: [String: Any] = [:]) async throws -> [String: Any] {
        let minted = try await mint(product: product, type: "auto_renewable", extra: extra)
        let token = try #require(minted["purchase_token"] as? String)
        let acknowledged = try await post(
            Self.subscriptionAcknowledgePath(subscription: product, token), [:], bearer: try await accessToken())
        #expect(acknowledged.status == 204)
        return minted
    }

    /// Posts `/sim/lifecycle` and returns the answer, expecting 200.
    @discardableResult
    func lifecycle(_ token: String, _ event: String, _ extra: [String: Any] = [:]) async throws -> [String: Any] {
        var object: [String: Any] = ["purchase_token": token, "event": event]
        object.merge(extra) { _, new in new }
        let reply = try await post("sim/lifecycle", object)
        #expect(reply.status == 200, "\(event): \(String(decoding: reply.data, as: UTF8.self))")
        return reply.json
    }

    /// Checks an OIDC token against the JWK set the simulator publishes; returns its claims when the signature holds.
    func verifiedClaims(_ jwt: String) async throws -> [String: Any]? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]),
            let header = (try JSONSerialization.jsonObject(with: headerData)) as? [String: Any]
        else { return nil }
        #expect(header["alg"] as? String == "RS256")
        let certs = try await get("oauth2/v3/certs")
        let keys = certs.json["keys"] as? [[String: Any]] ?? []
        guard let jwk = keys.first(where: { $0["kid"] as? String == header["kid"] as? String }),
            let n = (jwk["n"] as? String).flatMap(Base64URL.decode),
            let e = (jwk["e"] as? String).flatMap(Base64URL.decode)
        else { return nil }
        let key = try _RSA.Signing.PublicKey(n: n, e: e)
        guard
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: SHA256.hash(data: Data("\(parts[0]).\(parts[1])".utf8)), padding: .insecurePKCS1v1_5)
        else { return nil }
        return (try JSONSerialization.jsonObject(with: claimsData)) as? [String: Any]
    }
}
