import Crypto
import Foundation
import Logging
import Metrics
import Observability
import ServiceLifecycle

/// How a webhook is POSTed; the command passes the project's curl engine, tests a fake.
public protocol WebhookTransport: Sendable {
    /// POSTs `body` and returns the HTTP status; throws when nothing answered.
    func post(
        url: String, body: [UInt8], headers: [(name: String, value: String)], timeout: Duration
    ) async throws
        -> Int
}

/// Delivers each lifecycle event to every configured webhook URL, HMAC-signed, retrying with exponential backoff
/// until a 2xx or the attempt limit. Deliveries are rows of the store, written with the event in the projection's
/// transaction, so none is lost by a crash; the sender runs beside the projection and a dead webhook only piles
/// up its own rows, never holding up the projection.
///
/// Signature: `X-Verify-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, the body being the
/// event's JSON (`entitlement-event/v1`); `X-Verify-Event-Id` repeats the event id for de-duplication.
public final class WebhookSender: Service, Sendable {
    private let store: any EntitlementStore
    private let transport: any WebhookTransport
    private let key: SymmetricKey
    private let maximumAttempts: Int
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let wake = WakeSignal()
    /// First retry delay and ceiling of the exponential backoff.
    static let firstDelay: Double = 1
    static let maximumDelay: Double = 600

    public init(
        store: any EntitlementStore, transport: any WebhookTransport, secret: String, maximumAttempts: Int,
        logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.transport = transport
        self.key = SymmetricKey(data: Array(secret.utf8))
        self.maximumAttempts = maximumAttempts
        self.logger = logger
        self.now = now
    }

    public func poke() { wake.signal() }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.wake.rounds(logger: self.logger, failure: "entitlements: webhook round failed") {
                try await self.deliverRound()
            }
        }
    }

    /// Attempts every due delivery once (at most 16 at a time); returns how many were attempted.
    func deliverRound(limit: Int = 64) async throws -> Int {
        let due = try await store.dueWebhookDeliveries(at: now(), limit: limit)
        guard !due.isEmpty else { return 0 }
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for delivery in due {
                if running >= 16 {
                    await group.next()
                    running -= 1
                }
                group.addTask { await self.attempt(delivery) }
                running += 1
            }
        }
        return due.count
    }

    func attempt(_ delivery: WebhookDelivery) async {
        let body = delivery.event.json
        let instant = now()
        let timestamp = String(Int64(instant.timeIntervalSince1970))
        let headers: [(name: String, value: String)] = [
            ("Content-Type", "application/json"), ("X-Verify-Event-Id", delivery.event.eventID),
            ("X-Verify-Signature", "t=\(timestamp),v1=\(Self.signature(key: key, timestamp: timestamp, body: body))"),
        ]
        var delivered = false
        do {
            let status = try await transport.post(
                url: delivery.url, body: body, headers: headers, timeout: .seconds(10))
            delivered = (200..<300).contains(status)
        } catch {
            delivered = false
        }
        let attempts = delivery.attempts + 1
        let next: Date? =
            delivered || attempts >= maximumAttempts
            ? nil : instant.addingTimeInterval(min(Self.maximumDelay, Self.firstDelay * pow(2, Double(attempts - 1))))
        let result = delivered ? "delivered" : next == nil ? "given_up" : "failed"
        Counter(label: MetricNames.entitlementsWebhookAttempts, dimensions: [("result", result)]).increment()
        if result == "given_up" {
            logger.warning(
                "entitlements: webhook delivery given up",
                metadata: [
                    LogKeys.eventID: "\(delivery.event.eventID)", LogKeys.webhookAttempts: "\(attempts)",
                ])
        }
        do {
            try await store.recordWebhookAttempt(delivery, delivered: delivered, nextAttempt: next, at: instant)
        } catch {
            logger.notice(
                "entitlements: could not record a webhook attempt", metadata: [LogKeys.error: "\(error)"])
        }
    }

    /// Hex HMAC-SHA256 of `"<timestamp>.<body>"`.
    public static func signature(key: SymmetricKey, timestamp: String, body: [UInt8]) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(timestamp).".utf8))
        hmac.update(data: body)
        return Data(hmac.finalize()).map { String(format: "%02x", $0) }.joined()
    }
}
