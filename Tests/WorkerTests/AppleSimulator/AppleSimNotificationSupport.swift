import AppleSimulator
import Foundation
import Hummingbird
import Logging
import Synchronization
import Testing

/// A clock tests move by hand.
final class AppleSimManualClock: Sendable {
    private let current: Mutex<Date>
    init(_ start: Date = Date()) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func advance(seconds: Double) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var function: @Sendable () -> Date { { self.now } }
}

/// Collects scheduled notification work; the test runs it one item at a time, moving the clock by each delay.
final class AppleSimManualScheduler: NotificationScheduler {
    private let pending = Mutex<[(delay: Double, work: @Sendable () async -> Void)]>([])
    private let ran = Mutex<[Double]>([])
    let clock: AppleSimManualClock

    init(clock: AppleSimManualClock) { self.clock = clock }

    func schedule(afterSeconds: Double, _ work: @escaping @Sendable () async -> Void) {
        pending.withLock { $0.append((afterSeconds, work)) }
    }

    var pendingCount: Int { pending.withLock { $0.count } }
    /// The delays of the work run so far, in order.
    var delays: [Double] { ran.withLock { $0 } }

    /// Runs the oldest pending item; false when none is pending.
    @discardableResult
    func runNext() async -> Bool {
        guard let item = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return false }
        ran.withLock { $0.append(item.delay) }
        clock.advance(seconds: item.delay)
        await item.work()
        return true
    }

    /// Runs pending items (and those they schedule) until none is left, at most `limit`.
    func runAll(limit: Int = 1000) async {
        for _ in 0..<limit where await runNext() {}
    }
}

/// A notification endpoint double: answers each post with the next planned result (then the last one again) and
/// keeps the bodies.
final class AppleSimRecordingTransport: NotificationTransport {
    private let state: Mutex<(plan: [NotificationAttemptResult], bodies: [[UInt8]])>

    init(_ plan: [NotificationAttemptResult] = [.success]) { state = Mutex((plan, [])) }

    func post(url: String, body: [UInt8]) async -> NotificationAttemptResult {
        state.withLock { state in
            state.bodies.append(body)
            return state.plan.count > 1 ? state.plan.removeFirst() : state.plan.first ?? .success
        }
    }

    var bodies: [[UInt8]] { state.withLock { $0.bodies } }

    /// The decoded payloads of every body posted, in order.
    var payloads: [[String: Any]] { bodies.compactMap(AppleSimNotifications.payload) }
}

enum AppleSimNotifications {
    /// The decoded JWS payload of a `{"signedPayload": …}` body (signature not checked).
    static func payload(body: [UInt8]) -> [String: Any]? {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let signed = object["signedPayload"] as? String
        else { return nil }
        return payload(jws: signed)
    }

    static func payload(jws: String) -> [String: Any]? {
        let parts = jws.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// `notificationType` or `notificationType/subtype`.
    static func kind(_ payload: [String: Any]) -> String {
        let type = payload["notificationType"] as? String ?? "?"
        return (payload["subtype"] as? String).map { "\(type)/\($0)" } ?? type
    }

    /// A simulator that is not serving HTTP: notifications go to `transport` through `scheduler`.
    static func simulator(
        transport: AppleSimRecordingTransport, scheduler: AppleSimManualScheduler, timeScale: Double = 3600,
        random: Double = 0.5
    ) throws -> AppleSimulator {
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        configuration.pki = try AppleSimHarness.sharedPKI.get()
        configuration.notificationURL = "http://127.0.0.1:9/apple-notifications"
        configuration.notificationTimeScale = timeScale
        configuration.notificationTransport = transport
        configuration.notificationScheduler = scheduler
        configuration.now = scheduler.clock.function
        configuration.random = AppleSimFixedRandom(random)
        return try AppleSimulator(configuration: configuration)
    }
}

/// A real HTTP endpoint for notifications: answers with the planned statuses (then the last one again) and
/// keeps every body it received.
enum AppleSimNotificationReceiver {
    final class Box: Sendable {
        let plan: Mutex<[Int]>
        let bodies = Mutex<[[UInt8]]>([])
        init(_ plan: [Int]) { self.plan = Mutex(plan) }
    }

    static func with<T>(statuses: [Int], _ body: (_ url: String, _ box: Box) async throws -> T) async throws -> T {
        let box = Box(statuses)
        let router = Router()
        router.post("hook") { request, _ -> Response in
            var request = request
            let buffer = try await request.collectBody(upTo: 1 << 20)
            box.bodies.withLock {
                $0.append(buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? [])
            }
            let status = box.plan.withLock { $0.count > 1 ? $0.removeFirst() : $0.first ?? 200 }
            return Response(status: HTTPResponse.Status(code: status))
        }
        let ready = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in ready.continuation.yield(channel.localAddress?.port ?? 0) })
        let task = Task { try await app.runService() }
        defer { task.cancel() }
        var iterator = ready.stream.makeAsyncIterator()
        let port = try #require(await iterator.next())
        return try await body("http://127.0.0.1:\(port)/hook", box)
    }
}

/// Polls `condition` every 10 ms until it holds, failing after `seconds`.
func appleSimEventually(
    _ what: String, within seconds: Double = 20, _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("timed out waiting for \(what)")
    throw CancellationError()
}
