import CodedErrors
import Crypto
import Foundation
import Messages
import StoreHTTP
import Synchronization
import _CryptoExtras

/// POSTs one push to the configured endpoint: the HTTP status, or nil when no answer came (connection refused, timed
/// out). Tests may inject a double; the default is the project's curl engine.
public protocol PlayPushTransport: Sendable {
    func post(url: String, headers: [(name: String, value: String)], body: [UInt8], timeout: Duration) async -> Int?
}

/// POSTs through a `CurlHTTPEngine`, made at the first push, so a simulator that pushes nothing runs no engine thread.
public final class PlayCurlPushTransport: PlayPushTransport {
    private let engine = LazyCurlHTTPEngine()

    public init() {}

    public func post(
        url: String, headers: [(name: String, value: String)], body: [UInt8], timeout: Duration
    ) async -> Int? {
        return try? await engine.execute(
            TransportRequest(method: .post, url: url, headers: headers, body: body, timeout: timeout)
        ).status
    }
}

/// Where and how Real-time developer notifications are pushed: Pub/Sub's push subscription, its OIDC token and its
/// retry policy.
public struct PlayPushConfiguration: Sendable {
    /// The push endpoint (`--push-endpoint`); nil: nothing is published or recorded (as an app without RTDN).
    /// Default: nil.
    public var endpoint: String?
    /// The push subscription's name, sent as the envelope's `subscription` (`--push-subscription`).
    /// Default: `projects/play-simulator/subscriptions/play-rtdn`.
    public var subscription = "projects/play-simulator/subscriptions/play-rtdn"
    /// The OIDC token's `aud` (`--push-audience`); nil: the endpoint URL, as Pub/Sub does. Default: nil.
    public var audience: String?
    /// The pushing service account, the token's `email` (`--push-service-account`).
    /// Default: `rtdn-push@play-simulator.iam.gserviceaccount.com`.
    public var serviceAccountEmail = "rtdn-push@play-simulator.iam.gserviceaccount.com"
    /// Seconds of the simulator's clock before the first retry (`--push-min-backoff`), 0 to 600. Default: 10.
    public var minimumBackoff: TimeInterval = 10
    /// The longest wait between attempts (`--push-max-backoff`), 0 to 600. Default: 600.
    public var maximumBackoff: TimeInterval = 600
    /// Spreads each wait uniformly over 50% to 150% of it (within the minimum and maximum) (`--push-jitter`).
    /// Default: false.
    public var jitter = false
    /// How long an unacknowledged message is retried, in seconds of the simulator's clock (`--push-retention`).
    /// Default: 604800 (Pub/Sub's seven days).
    public var retention: TimeInterval = 7 * 86_400
    /// How long one push waits for its answer (real time): Pub/Sub's acknowledgement deadline. Default: 10 s.
    public var attemptTimeout: Duration = .seconds(10)
    /// `Cache-Control: public, max-age=N` on `GET /oauth2/v3/certs` (`--jwks-max-age`). Default: 3600.
    public var jwksMaxAge = 3600
    /// The key that signs the OIDC tokens; nil: a fresh RSA-2048 key at first use. Default: nil.
    public var signingKey: _RSA.Signing.PrivateKey?
    /// The key the `wrong_key` fault signs with (never published); nil: a fresh one at first use. Default: nil.
    public var strangerKey: _RSA.Signing.PrivateKey?
    /// Dates the OIDC token's `iat` and `exp` by the system clock instead of the simulator's
    /// (`--push-token-system-clock`): a receiver that checks tokens against its own clock needs this when the
    /// simulator's clock runs faster than real time. Default: false.
    public var tokenDatesFromSystemClock = false
    /// Sends the pushes. Default: curl.
    public var transport: any PlayPushTransport = PlayCurlPushTransport()
    /// Real time between two delivery rounds of the serving loop; the loop runs unless the clock is manual (tests
    /// call `deliverDue()`). Default: 50 ms.
    public var deliveryInterval: Duration = .milliseconds(50)

    public init() {}
}

/// What a push fault does.
public enum PlayPushFaultKind: String, Sendable, Codable, CaseIterable {
    /// The message is never pushed (counted as dropped); the purchase's state changes all the same.
    case drop
    /// The first delivery is sent twice with the same `messageId`.
    case duplicate
    /// The first delivery waits `delay_s` seconds of the clock.
    case delay
    /// An attempt's token is signed by a key the JWKS does not hold.
    case wrongKey = "wrong_key"
    /// An attempt's token names another audience.
    case wrongAudience = "wrong_audience"
    /// An attempt's token expired an hour ago.
    case expiredToken = "expired_token"

    var isTokenFault: Bool { self == .wrongKey || self == .wrongAudience || self == .expiredToken }
}

/// One push fault: the next `count` messages (attempts, for the token faults), or else each with probability `ratio`
/// (default 1).
public struct PlayPushFaultRule: Sendable, Codable, Equatable {
    public var fault: PlayPushFaultKind
    public var count: Int?
    public var ratio: Double?
    public var delayS: Double?

    enum CodingKeys: String, CodingKey {
        case fault, count, ratio
        case delayS = "delay_s"
    }

    var problem: String? {
        if let count, count < 1 { return "count must be at least 1" }
        if let ratio, !(ratio.isFinite && (0...1).contains(ratio)) { return "ratio must be 0...1" }
        if fault == .delay, !((delayS ?? -1).isFinite && (0...(7 * 86_400)).contains(delayS ?? -1)) {
            return "delay needs delay_s 0...604800"
        }
        return nil
    }
}

/// The push faults `POST /sim/push/faults` installs; `{}` clears them.
public struct PlayPushFaultPlan: Sendable, Codable, Equatable {
    public var rules: [PlayPushFaultRule] = []
}

/// In an extension, so that the memberwise initializer stays.
extension PlayPushFaultPlan {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        rules = try container.decodeIfPresent([PlayPushFaultRule].self, forKey: .rules) ?? []
    }
}

/// Faults for the notifications of one lifecycle call, on top of the plan.
public struct PlayPushOptions: Sendable, Equatable {
    public var drop = false
    public var duplicate = false
    public var delaySeconds: TimeInterval = 0
    /// `wrong_key`, `wrong_audience` or `expired_token`: every attempt's token is bad this way.
    public var badToken: PlayPushFaultKind?

    public init() {}
}

/// One delivery attempt of a message.
public struct PlayPushAttempt: Sendable, Equatable {
    public var at: Date
    /// The endpoint's status; nil when no answer came.
    public var status: Int?
    /// The second send of a duplicated delivery.
    public var duplicate: Bool
    /// The token fault the attempt carried, if any.
    public var badToken: PlayPushFaultKind?
}

/// One published message and what became of it.
public struct PlayPushRecord: Sendable {
    public var messageId: String
    public var notification: PlayDeveloperNotification
    public var data: [UInt8]
    public var publishTime: Date
    public var dropped = false
    public var duplicated = false
    public var delaySeconds: TimeInterval = 0
    public var badToken: PlayPushFaultKind?
    public var attempts: [PlayPushAttempt] = []
    public var acknowledgedAt: Date?
    /// Retention passed before any attempt was acknowledged.
    public var expired = false
    var nextAttemptAt: Date?
    var failures = 0
    var inFlight = false

    public var acknowledged: Bool { acknowledgedAt != nil }
}

/// Publishes DeveloperNotifications as Pub/Sub pushes, each retried with Pub/Sub's exponential backoff until a 2xx
/// or until retention expires. State lives behind one lock; `deliverDue()` takes what is due under it, sends with
/// the lock released, then records the answers. Every date is the simulator's clock, so a test with a manual clock
/// drives each attempt by advancing it and calling `deliverDue()`.
final class PlayPushDispatcher: Sendable {
    /// The statuses Pub/Sub counts as an acknowledgement.
    static let acknowledgingStatuses: Set<Int> = [102, 200, 201, 202, 204]
    static let issuer = "https://accounts.google.com"
    static let tokenLifetime: TimeInterval = 3600

    private struct State {
        var configuration: PlayPushConfiguration
        var records: [PlayPushRecord] = []
        var plan = PlayPushFaultPlan()
        var remaining: [Int?] = []
        var applied: [Int] = []
        var nextMessageId: Int64
        var signingKey: (key: _RSA.Signing.PrivateKey, kid: String)?
        var strangerKey: (key: _RSA.Signing.PrivateKey, kid: String)?
    }

    private let state: Mutex<State>
    private let clock: PlaySimulatorClock
    private let random: any PlayRandomSource

    init(configuration: PlayPushConfiguration, clock: PlaySimulatorClock, random: any PlayRandomSource) {
        state = Mutex(
            State(configuration: configuration, nextMessageId: Int64.random(in: 1_000_000_000_000...9_000_000_000_000)))
        self.clock = clock
        self.random = random
    }

    var configuration: PlayPushConfiguration { state.withLock { $0.configuration } }

    func configure(_ change: (inout PlayPushConfiguration) -> Void) {
        state.withLock { change(&$0.configuration) }
    }

    // MARK: Faults

    func setFaults(_ plan: PlayPushFaultPlan) throws(PlaySimulatorError) {
        for (index, rule) in plan.rules.enumerated() {
            if let problem = rule.problem { throw PlaySimulatorError(.invalidRequest, "rules[\(index)]: \(problem)") }
        }
        state.withLock {
            $0.plan = plan
            $0.remaining = plan.rules.map(\.count)
            $0.applied = Array(repeating: 0, count: plan.rules.count)
        }
    }

    func faultReport() -> [String: Any] {
        state.withLock { state in
            var rules: [[String: Any]] = []
            for (index, rule) in state.plan.rules.enumerated() {
                var object: [String: Any] = ["fault": rule.fault.rawValue, "applied": state.applied[index]]
                if let count = rule.count { object["count"] = count }
                if let ratio = rule.ratio { object["ratio"] = ratio }
                if let delay = rule.delayS { object["delay_s"] = delay }
                if let remaining = state.remaining[index] { object["remaining"] = remaining }
                rules.append(object)
            }
            return ["rules": rules]
        }
    }

    /// The rules of `kinds` that hit one message or attempt, drawn in order; counts what each rule did.
    private func draw(_ state: inout State, kinds: (PlayPushFaultKind) -> Bool) -> [PlayPushFaultRule] {
        var hits: [PlayPushFaultRule] = []
        for (index, rule) in state.plan.rules.enumerated() where kinds(rule.fault) {
            if let left = state.remaining[index] {
                guard left > 0 else { continue }
                state.remaining[index] = left - 1
            } else if let ratio = rule.ratio, ratio < 1, !(ratio > 0 && random.nextUnit() < ratio) {
                continue
            }
            state.applied[index] += 1
            hits.append(rule)
        }
        return hits
    }

    // MARK: Publishing

    /// Records `notification` and makes it due now (or after its delay); nil when no endpoint is configured.
    @discardableResult
    func publish(_ notification: PlayDeveloperNotification, options: PlayPushOptions = .init()) -> PlayPushRecord? {
        let now = clock.now()
        let data = PlayAPIAnswers.json(notification.json())
        return state.withLock { state -> PlayPushRecord? in
            guard state.configuration.endpoint != nil else { return nil }
            let hits = draw(&state) { !$0.isTokenFault }
            var record = PlayPushRecord(
                messageId: String(state.nextMessageId), notification: notification, data: data, publishTime: now)
            state.nextMessageId += 1
            record.dropped = options.drop || hits.contains { $0.fault == .drop }
            record.duplicated = options.duplicate || hits.contains { $0.fault == .duplicate }
            record.delaySeconds = max(
                options.delaySeconds, hits.filter { $0.fault == .delay }.map { $0.delayS ?? 0 }.max() ?? 0)
            record.badToken = options.badToken
            record.nextAttemptAt = record.dropped ? nil : now.addingTimeInterval(record.delaySeconds)
            state.records.append(record)
            return record
        }
    }

    // MARK: Delivering

    private struct Send: Sendable {
        var index: Int
        var url: String
        var body: [UInt8]
        var tokens: [(token: String, bad: PlayPushFaultKind?)]
        var timeout: Duration
        var transport: any PlayPushTransport
    }

    /// Sends every message due now (first attempts, retries whose backoff ran out) and awaits the answers; returns
    /// how many messages it sent. Messages whose retention ran out are marked expired instead.
    @discardableResult
    func deliverDue() async -> Int {
        let now = clock.now()
        let sends: [Send] = state.withLock { state in
            guard let endpoint = state.configuration.endpoint else { return [] }
            var sends: [Send] = []
            for index in state.records.indices {
                let record = state.records[index]
                guard !record.inFlight, record.acknowledgedAt == nil, !record.expired,
                    let due = record.nextAttemptAt, due <= now
                else { continue }
                if now >= record.publishTime.addingTimeInterval(state.configuration.retention) {
                    state.records[index].expired = true
                    state.records[index].nextAttemptAt = nil
                    continue
                }
                state.records[index].inFlight = true
                let copies = record.duplicated && record.attempts.isEmpty ? 2 : 1
                var tokens: [(String, PlayPushFaultKind?)] = []
                for _ in 0..<copies {
                    let bad = record.badToken ?? draw(&state) { $0.isTokenFault }.first?.fault
                    let tokenNow = state.configuration.tokenDatesFromSystemClock ? Date() : now
                    tokens.append((oidcToken(&state, now: tokenNow, bad: bad), bad))
                }
                sends.append(
                    Send(
                        index: index, url: endpoint,
                        body: envelope(record, subscription: state.configuration.subscription),
                        tokens: tokens, timeout: state.configuration.attemptTimeout,
                        transport: state.configuration.transport))
            }
            return sends
        }
        await withTaskGroup(of: Void.self) { group in
            for send in sends {
                group.addTask { await self.deliver(send) }
            }
        }
        return sends.count
    }

    private func deliver(_ send: Send) async {
        var attempts: [PlayPushAttempt] = []
        for (number, token) in send.tokens.enumerated() {
            let status = await send.transport.post(
                url: send.url,
                headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(token.token)")],
                body: send.body, timeout: send.timeout)
            attempts.append(
                PlayPushAttempt(at: clock.now(), status: status, duplicate: number > 0, badToken: token.bad))
        }
        let answeredAt = clock.now()
        state.withLock { state in
            var record = state.records[send.index]
            record.inFlight = false
            record.attempts.append(contentsOf: attempts)
            if attempts.contains(where: { $0.status.map(Self.acknowledgingStatuses.contains) ?? false }) {
                record.acknowledgedAt = answeredAt
                record.nextAttemptAt = nil
            } else {
                record.failures += 1
                record.nextAttemptAt = answeredAt.addingTimeInterval(
                    backoff(failures: record.failures, state.configuration))
            }
            state.records[send.index] = record
        }
    }

    /// Pub/Sub's exponential backoff: the minimum after the first failure, doubling after each one, at most the maximum.
    func backoff(failures: Int, _ configuration: PlayPushConfiguration) -> TimeInterval {
        let low = max(0, configuration.minimumBackoff)
        let high = max(low, configuration.maximumBackoff)
        var delay = min(high, low * pow(2, Double(max(0, failures - 1))))
        if configuration.jitter { delay = min(high, max(low, delay * (0.5 + random.nextUnit()))) }
        return delay
    }

    /// The push request's body: Pub/Sub's envelope, with both spellings of the message id and publish time.
    private func envelope(_ record: PlayPushRecord, subscription: String) -> [UInt8] {
        let publishTime = RFC3339.format(record.publishTime)
        return PlayAPIAnswers.json([
            "message": [
                "data": Data(record.data).base64EncodedString(),
                "messageId": record.messageId, "message_id": record.messageId,
                "publishTime": publishTime, "publish_time": publishTime,
            ],
            "subscription": subscription,
        ])
    }

    // MARK: The OIDC token and its keys

    private static func makeKey(_ given: _RSA.Signing.PrivateKey?) -> (key: _RSA.Signing.PrivateKey, kid: String)? {
        guard let key = given ?? (try? _RSA.Signing.PrivateKey(keySize: .bits2048)) else { return nil }
        // Google's key ids are 40 hex digits; the key's own digest keeps the id stable for a given key.
        let kid = SHA256.hash(data: key.publicKey.derRepresentation).prefix(20)
            .map { String(format: "%02x", $0) }.joined()
        return (key, kid)
    }

    private func signingKey(_ state: inout State) -> (key: _RSA.Signing.PrivateKey, kid: String)? {
        if state.signingKey == nil { state.signingKey = Self.makeKey(state.configuration.signingKey) }
        return state.signingKey
    }

    /// The token Pub/Sub puts in `Authorization`: RS256 by the published key, `kid`, and exactly the claims `iss`,
    /// `aud`, `email`, `email_verified`, `iat`, `exp` (an hour). `bad` spoils it one way.
    private func oidcToken(_ state: inout State, now: Date, bad: PlayPushFaultKind?) -> String {
        let signer: (key: _RSA.Signing.PrivateKey, kid: String)?
        if bad == .wrongKey {
            if state.strangerKey == nil { state.strangerKey = Self.makeKey(state.configuration.strangerKey) }
            signer = state.strangerKey
        } else {
            signer = signingKey(&state)
        }
        guard let signer else { return "" }
        let audience = state.configuration.audience ?? state.configuration.endpoint ?? ""
        var iat = Int64(now.timeIntervalSince1970)
        if bad == .expiredToken { iat -= 2 * Int64(Self.tokenLifetime) }
        let header = PlayAPIAnswers.json(["alg": "RS256", "kid": signer.kid, "typ": "JWT"])
        let claims = PlayAPIAnswers.json([
            "iss": Self.issuer,
            "aud": bad == .wrongAudience ? "https://wrong-audience.play-simulator.invalid" : audience,
            "email": state.configuration.serviceAccountEmail, "email_verified": true,
            "iat": iat, "exp": iat + Int64(Self.tokenLifetime),
        ])
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        guard
            let signature = try? signer.key.signature(
                for: SHA256.hash(data: Data(signingInput.utf8)), padding: .insecurePKCS1v1_5)
        else { return "" }
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// Google's JWK set for the published key: `kty`, `alg`, `use`, `kid`, `n`, `e` (base64url, big-endian).
    func jwks() -> (body: [String: Any], maxAge: Int) {
        state.withLock { state in
            guard let signer = signingKey(&state), let primitives = try? signer.key.publicKey.getKeyPrimitives()
            else { return (["keys": [Any]()], state.configuration.jwksMaxAge) }
            let key: [String: Any] = [
                "kty": "RSA", "alg": "RS256", "use": "sig", "kid": signer.kid,
                "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent),
            ]
            return (["keys": [key]], state.configuration.jwksMaxAge)
        }
    }

    // MARK: Reading

    func records() -> [PlayPushRecord] { state.withLock { $0.records } }

    /// `/sim/pushes`: each message with its attempts, and totals.
    func report() -> [String: Any] {
        let records = records()
        let pushes: [[String: Any]] = records.map { record in
            var object: [String: Any] = [
                "message_id": record.messageId, "type": record.notification.kind,
                "package_name": record.notification.packageName,
                "publish_time_ms": record.publishTime.epochMilliseconds,
                "attempts": record.attempts.count, "acknowledged": record.acknowledged, "dropped": record.dropped,
                "duplicated": record.duplicated, "expired": record.expired, "delay_s": record.delaySeconds,
                "attempt_log": record.attempts.map { attempt -> [String: Any] in
                    var entry: [String: Any] = ["at_ms": attempt.at.epochMilliseconds, "duplicate": attempt.duplicate]
                    if let status = attempt.status { entry["status"] = status }
                    if let bad = attempt.badToken { entry["bad_token"] = bad.rawValue }
                    return entry
                },
                "data": (try? JSONSerialization.jsonObject(with: Data(record.data))) ?? [:],
            ]
            if let token = record.notification.purchaseToken { object["purchase_token"] = token }
            if let acknowledged = record.acknowledgedAt {
                object["acknowledged_at_ms"] = acknowledged.epochMilliseconds
            }
            if let next = record.nextAttemptAt { object["next_attempt_ms"] = next.epochMilliseconds }
            return object
        }
        var summary: [String: Int] = [:]
        summary["published"] = records.count
        summary["acknowledged"] = records.filter(\.acknowledged).count
        summary["dropped"] = records.filter(\.dropped).count
        summary["duplicated"] = records.filter(\.duplicated).count
        summary["expired"] = records.filter(\.expired).count
        summary["pending"] = records.filter { !$0.acknowledged && !$0.dropped && !$0.expired }.count
        summary["attempts"] = records.reduce(0) { $0 + $1.attempts.count }
        return ["pushes": pushes, "summary": summary]
    }
}
