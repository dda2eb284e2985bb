import CodedErrors
import Foundation
import Synchronization

/// A source of uniform numbers in `0..<1`, injectable so that tests decide which requests a ratio hits.
public protocol PlayRandomSource: Sendable {
    func nextUnit() -> Double
}

/// The system random generator.
public struct PlaySystemRandom: PlayRandomSource {
    public init() {}
    public func nextUnit() -> Double { Double.random(in: 0..<1) }
}

/// The routes of Google's that the simulator answers, by Google's method names; faults and counts use them.
public enum PlayRoute: String, Sendable, CaseIterable, Codable {
    case token
    case subscriptionsV2Get = "purchases.subscriptionsv2.get"
    case productsV2Get = "purchases.productsv2.getproductpurchasev2"
    case productsAcknowledge = "purchases.products.acknowledge"
    case productsConsume = "purchases.products.consume"
    case subscriptionsAcknowledge = "purchases.subscriptions.acknowledge"
    case voidedPurchasesList = "purchases.voidedpurchases.list"
    case ordersReviewRefund = "orders.reviewrefund"
}

/// What a fault does to a request it hits.
public enum PlayFaultKind: String, Sendable, Codable, CaseIterable {
    /// 429 `RESOURCE_EXHAUSTED` with `Retry-After` (seconds).
    case http429 = "http_429"
    /// 500 `INTERNAL`.
    case http500 = "http_500"
    /// 503 `UNAVAILABLE`.
    case http503 = "http_503"
    /// Holds the request `latency_ms` (real time), then answers it normally (other rules still apply).
    case latency
    /// The token endpoint answers 503, as when Google's OAuth service is down (route `token` only).
    case tokenEndpointDown = "token_endpoint_down"
    /// The access token the request carries expires now: 401, and every later call with it is 401 too, until the
    /// client fetches a new one (API routes only).
    case expiredToken = "expired_token"
}

/// One fault: which route it hits (a route name, `api` for every API route, `*` for all), what it does, and how
/// often: the next `count` requests of the route, or else each with probability `ratio` (default 1).
public struct PlayFaultRule: Sendable, Codable, Equatable {
    public var route: String
    public var fault: PlayFaultKind
    public var count: Int?
    public var ratio: Double?
    public var latencyMs: Double?
    public var retryAfterS: Int?

    enum CodingKeys: String, CodingKey {
        case route, fault, count, ratio
        case latencyMs = "latency_ms"
        case retryAfterS = "retry_after_s"
    }

    func matches(_ route: PlayRoute) -> Bool {
        switch self.route {
        case "*": return true
        case "api": return route != .token
        default: return self.route == route.rawValue
        }
    }

    /// Nil when the rule is well formed, else what is wrong with it.
    var problem: String? {
        guard route == "*" || route == "api" || PlayRoute(rawValue: route) != nil else {
            return "route must be *, api or one of \(PlayRoute.allCases.map(\.rawValue).joined(separator: ", "))"
        }
        if let count, count < 1 { return "count must be at least 1" }
        if let ratio, !(ratio.isFinite && (0...1).contains(ratio)) { return "ratio must be 0...1" }
        if fault == .latency, !((latencyMs ?? -1).isFinite && (0...600_000).contains(latencyMs ?? -1)) {
            return "latency needs latency_ms 0...600000"
        }
        if let retryAfterS, !(0...86_400).contains(retryAfterS) { return "retry_after_s must be 0...86400" }
        if fault == .tokenEndpointDown, route != PlayRoute.token.rawValue {
            return "token_endpoint_down applies to route token"
        }
        if fault == .expiredToken, route == PlayRoute.token.rawValue || route == "*" {
            return "expired_token applies to API routes"
        }
        return nil
    }
}

/// The faults `POST /sim/faults` installs: rules, checked in order for each request, and how long they last.
public struct PlayFaultPlan: Sendable, Codable, Equatable {
    public var rules: [PlayFaultRule] = []
    /// Seconds of the simulator's clock the plan lasts; absent or 0: until replaced.
    public var durationS: Double?

    enum CodingKeys: String, CodingKey {
        case rules
        case durationS = "duration_s"
    }
}

/// In an extension, so that the memberwise initializer stays.
extension PlayFaultPlan {
    /// `{}` is the empty plan: posting it clears every fault.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        rules = try container.decodeIfPresent([PlayFaultRule].self, forKey: .rules) ?? []
        durationS = try container.decodeIfPresent(Double.self, forKey: .durationS)
    }
}

/// What to do with one request.
enum PlayFaultOutcome: Equatable {
    case answer
    case status(PlayFaultKind, retryAfterS: Int)
    case expireToken
}

/// Holds the plan, draws each request's fault, and counts what each rule did (`GET /sim/faults`).
final class PlayFaultInjector: Sendable {
    private struct State {
        var plan = PlayFaultPlan()
        var until: Date?
        /// Per rule: how many requests it hit, and how many its `count` has left.
        var applied: [Int] = []
        var remaining: [Int?] = []
    }

    private let state = Mutex(State())
    private let random: any PlayRandomSource
    private let clock: PlaySimulatorClock

    init(random: any PlayRandomSource, clock: PlaySimulatorClock) {
        self.random = random
        self.clock = clock
    }

    func set(_ plan: PlayFaultPlan) throws(PlaySimulatorError) {
        for (index, rule) in plan.rules.enumerated() {
            if let problem = rule.problem { throw PlaySimulatorError(.invalidRequest, "rules[\(index)]: \(problem)") }
        }
        let duration = plan.durationS ?? 0
        let until = duration > 0 && duration.isFinite ? clock.now().addingTimeInterval(duration) : nil
        state.withLock {
            $0 = State(
                plan: plan, until: until, applied: Array(repeating: 0, count: plan.rules.count),
                remaining: plan.rules.map(\.count))
        }
    }

    /// The plan with, per rule, `applied` and `remaining` (of its count), and the seconds the plan has left.
    func report() -> [String: Any] {
        let now = clock.now()
        return state.withLock { state in
            expireIfOver(&state, now: now)
            let encoder = JSONEncoder()
            var rules: [[String: Any]] = []
            for (index, rule) in state.plan.rules.enumerated() {
                var object =
                    ((try? encoder.encode(rule)).flatMap { try? JSONSerialization.jsonObject(with: $0) }
                        as? [String: Any]) ?? [:]
                object["applied"] = state.applied[index]
                if let remaining = state.remaining[index] { object["remaining"] = remaining }
                rules.append(object)
            }
            var answer: [String: Any] = ["rules": rules]
            if let until = state.until { answer["remaining_s"] = until.timeIntervalSince(now) }
            return answer
        }
    }

    /// The latency to add (ms) and the outcome for one request on `route`.
    func draw(_ route: PlayRoute) -> (latencyMs: Double, outcome: PlayFaultOutcome) {
        let now = clock.now()
        return state.withLock { state in
            expireIfOver(&state, now: now)
            var latency = 0.0
            for (index, rule) in state.plan.rules.enumerated() where rule.matches(route) {
                if let left = state.remaining[index] {
                    guard left > 0 else { continue }
                } else if let ratio = rule.ratio, ratio < 1, !(ratio > 0 && random.nextUnit() < ratio) {
                    continue
                }
                if let left = state.remaining[index] { state.remaining[index] = left - 1 }
                state.applied[index] += 1
                switch rule.fault {
                case .latency:
                    latency += rule.latencyMs ?? 0
                case .expiredToken:
                    return (latency, .expireToken)
                case .http429, .http500, .http503, .tokenEndpointDown:
                    return (latency, .status(rule.fault, retryAfterS: rule.retryAfterS ?? 30))
                }
            }
            return (latency, .answer)
        }
    }

    private func expireIfOver(_ state: inout State, now: Date) {
        if let until = state.until, until <= now { state = State() }
    }
}
