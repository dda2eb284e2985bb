import AppleClients
import Foundation
import Messages
import StoreHTTP
import Synchronization

/// The outcome of one notification send attempt, spelled as Apple's `sendAttemptResult`.
public enum NotificationAttemptResult: String, Sendable, Codable {
    case success = "SUCCESS"
    case timedOut = "TIMED_OUT"
    case noResponse = "NO_RESPONSE"
    case socketIssue = "SOCKET_ISSUE"
    case unsuccessfulHTTPResponseCode = "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
    case other = "OTHER"
}

/// Posts one notification body to the developer's URL. Tests inject doubles; the default is the project's curl
/// engine.
public protocol NotificationTransport: Sendable {
    func post(url: String, body: [UInt8]) async -> NotificationAttemptResult
}

/// Runs work later. Tests inject a manual scheduler, so the retry schedule is checked without waiting.
public protocol NotificationScheduler: Sendable {
    func schedule(afterSeconds: Double, _ work: @escaping @Sendable () async -> Void)
}

/// Sleeps in a task of its own, then runs the work.
public struct TaskNotificationScheduler: NotificationScheduler {
    public init() {}
    public func schedule(afterSeconds: Double, _ work: @escaping @Sendable () async -> Void) {
        Task {
            if afterSeconds > 0 { try? await Task.sleep(for: .milliseconds(Int64(afterSeconds * 1000))) }
            await work()
        }
    }
}

/// POSTs through a `CurlHTTPEngine`, created at the first send, so a simulator without a notification URL runs no
/// engine thread. A 2xx answer is a success; any other answer or a transport failure is a failed attempt.
public final class CurlNotificationTransport: NotificationTransport {
    private let engine = LazyCurlHTTPEngine()

    public init() {}

    public func post(url: String, body: [UInt8]) async -> NotificationAttemptResult {
        do {
            let response = try await engine.execute(
                TransportRequest(
                    method: .post, url: url, headers: [("Content-Type", "application/json")], body: body,
                    timeout: .seconds(15)))
            return (200..<300).contains(response.status) ? .success : .unsuccessfulHTTPResponseCode
        } catch let error as HTTPTransportError {
            switch error.code {
            case .timeout: return .timedOut
            case .connectFailed, .connectionLost: return .socketIssue
            default: return .other
            }
        } catch {
            return .other
        }
    }
}

/// Sends App Store Server Notifications V2 to the configured URL and keeps every notification with every send
/// attempt, which Get Notification History and Get Test Notification Status answer from.
///
/// Delivery follows Apple: a failed attempt (a non-2xx answer, a connection error, or a drop injected by
/// `notification_drop_ratio`) is retried in production 1, 12, 24, 48 and 72 hours after the previous attempt
/// (divided by `timeScale`), and never in the sandbox. `notification_duplicate_ratio` sends a delivered
/// notification once more; `notification_delay_ms` delays every attempt.
final class NotificationDispatcher: Sendable {
    /// Hours after the previous attempt at which Apple retries in production.
    static let retryHours: [Double] = [1, 12, 24, 48, 72]

    struct Attempt: Sendable, Equatable {
        var dateMs: Int64
        var result: NotificationAttemptResult
    }

    struct Record: Sendable {
        var uuid: String
        var type: String
        var subtype: String?
        var environment: AppleEnvironment
        var transactionId: String?
        var originalTransactionId: String?
        var signedDateMs: Int64
        var signedPayload: String
        var attempts: [Attempt] = []
        var testToken: String?
        /// The app the notification is about (its `data.bundleId`).
        var bundleId: String = ""

        var delivered: Bool { attempts.contains { $0.result == .success } }
    }

    private struct State {
        var target: String?
        var records: [Record] = []
        var byToken: [String: Int] = [:]
    }

    private let state: Mutex<State>
    private let pki: SimulatorPKI
    private let appAppleId: Int64
    /// Listed apps' Apple ids by bundle id; other bundle ids get `appAppleId`.
    private let appAppleIds: [String: Int64]
    private let timeScale: Double
    private let faults: FaultInjector
    private let stats: SimulatorStats
    private let transport: any NotificationTransport
    private let scheduler: any NotificationScheduler
    private let now: @Sendable () -> Date

    init(
        target: String?, pki: SimulatorPKI, appAppleId: Int64, appAppleIds: [String: Int64] = [:], timeScale: Double,
        faults: FaultInjector,
        stats: SimulatorStats, transport: any NotificationTransport, scheduler: any NotificationScheduler,
        now: @escaping @Sendable () -> Date
    ) {
        state = Mutex(State(target: target))
        self.pki = pki
        self.appAppleId = appAppleId
        self.appAppleIds = appAppleIds
        self.timeScale = timeScale > 0 && timeScale.isFinite ? timeScale : 1
        self.faults = faults
        self.stats = stats
        self.transport = transport
        self.scheduler = scheduler
        self.now = now
    }

    var target: String? { state.withLock { $0.target } }

    func setTarget(_ url: String?) { state.withLock { $0.target = url } }

    /// The scaled delay before retry `number` (1...5).
    func retryDelaySeconds(_ number: Int) -> Double {
        Self.retryHours[number - 1] * 3600 / timeScale
    }

    /// Signs and records a notification and schedules its first attempt. Without a URL Apple sends nothing, and
    /// neither does the simulator: nil, nothing recorded (and no signing cost for mints in benchmarks).
    @discardableResult
    func notify(_ event: SimulatedNotification.Event, testToken: String? = nil) throws -> Record? {
        guard target != nil else { return nil }
        let nowMs = AppleDates.nowMs(now())
        let uuid = UUID().uuidString.lowercased()
        let record = Record(
            uuid: uuid, type: event.type, subtype: event.subtype, environment: event.environment,
            transactionId: event.transaction?.transactionId,
            originalTransactionId: event.transaction?.originalTransactionId, signedDateMs: nowMs,
            signedPayload: try SimulatedNotification.sign(
                event, uuid: uuid,
                appAppleId: appAppleIds[event.transaction?.bundleId ?? event.bundleId ?? ""] ?? appAppleId, pki: pki,
                nowMs: nowMs),
            testToken: testToken, bundleId: event.transaction?.bundleId ?? event.bundleId ?? "")
        let index = state.withLock { state in
            state.records.append(record)
            let index = state.records.count - 1
            if let testToken { state.byToken[testToken] = index }
            return index
        }
        schedule(index: index, number: 0, baseDelaySeconds: 0)
        return record
    }

    /// Runs `work` after `seconds` on the notifications' scheduler: a lifecycle event due at a period's end.
    func scheduleEvent(afterSeconds seconds: Double, _ work: @escaping @Sendable () async -> Void) {
        scheduler.schedule(afterSeconds: max(0, seconds), work)
    }

    private func schedule(index: Int, number: Int, baseDelaySeconds: Double) {
        let delayMs = faults.notificationFaults().delayMs
        scheduler.schedule(afterSeconds: baseDelaySeconds + delayMs / 1000) { [self] in
            await attempt(index: index, number: number)
        }
    }

    /// Attempt `number` (0 the first, 1...5 the retries) of record `index`.
    private func attempt(index: Int, number: Int) async {
        let snapshot = state.withLock { state in
            (target: state.target, record: state.records[index])
        }
        let faults = faults.notificationFaults()
        let result: NotificationAttemptResult
        if faults.drop {
            result = .noResponse
        } else if let target = snapshot.target {
            result = await transport.post(
                url: target, body: SimulatedNotification.body(signedPayload: snapshot.record.signedPayload))
        } else {
            result = .noResponse
        }
        let attempt = Attempt(dateMs: AppleDates.nowMs(now()), result: result)
        state.withLock { $0.records[index].attempts.append(attempt) }
        stats.recordNotification(attempt: result == .success, retry: number > 0)
        if result == .success {
            if faults.duplicate {
                scheduler.schedule(afterSeconds: 0) { [self] in await sendDuplicate(index: index) }
            }
        } else if snapshot.record.environment == .production, number < Self.retryHours.count {
            schedule(index: index, number: number + 1, baseDelaySeconds: retryDelaySeconds(number + 1))
        }
    }

    /// A second delivery of a delivered notification, as Apple's at-least-once delivery may make; recorded, never
    /// retried.
    private func sendDuplicate(index: Int) async {
        let snapshot = state.withLock { state in (target: state.target, record: state.records[index]) }
        guard let target = snapshot.target else { return }
        let result = await transport.post(
            url: target, body: SimulatedNotification.body(signedPayload: snapshot.record.signedPayload))
        state.withLock { $0.records[index].attempts.append(Attempt(dateMs: AppleDates.nowMs(now()), result: result)) }
        stats.recordNotification(attempt: result == .success, retry: false, duplicate: true)
    }

    // MARK: Reading the record

    /// Every record, in the order sent.
    func records() -> [Record] { state.withLock { $0.records } }

    func record(testToken: String) -> Record? {
        state.withLock { state in state.byToken[testToken].map { state.records[$0] } }
    }

    /// Records of `environment` signed in `startMs..<endMs`, filtered as Get Notification History filters.
    func history(
        environment: AppleEnvironment, startMs: Int64, endMs: Int64, type: String?, subtype: String?,
        originalTransactionId: String?, onlyFailures: Bool, bundleId: String? = nil
    ) -> [Record] {
        state.withLock { state in
            state.records.filter { record in
                record.environment == environment && record.signedDateMs >= startMs && record.signedDateMs < endMs
                    && (bundleId == nil || record.bundleId == bundleId)
                    && (type == nil || record.type == type) && (subtype == nil || record.subtype == subtype)
                    && (originalTransactionId == nil || record.originalTransactionId == originalTransactionId)
                    && (!onlyFailures || !record.delivered)
            }
        }
    }
}
