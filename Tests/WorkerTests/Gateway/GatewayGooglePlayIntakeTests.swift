import Foundation
import Messages
import Operations
import Testing

@testable import Gateway

/// The Google Play side of the gateway's intake without a socket: the envelope's field spellings, the namespace
/// `/v1/receipts` may not use, and the Pub/Sub keys read through the key table.
@Suite("Gateway: Google Play intake and settings")
struct GatewayGooglePlayIntakeTests {
    static let at = Date(timeIntervalSince1970: 1_795_000_000)

    @Test("the envelope's snake_case spellings (message_id, publish_time) are read as the camelCase ones")
    func spellings() throws {
        let intake = GooglePlayPushIntake(now: { Self.at })
        let text = PubSubTestSigner.subscriptionNotification(token: "tok-9")
        let envelope: [String: Any] = [
            "message": [
                "data": Data(text.utf8).base64EncodedString(), "message_id": "42",
                "publish_time": "2026-11-29T12:00:00.5Z",
            ]
        ]
        let outcome = try intake.outcome(of: Array(try JSONSerialization.data(withJSONObject: envelope)))
        guard case .job(let job) = outcome, case .googlePlayNotification(let proof) = job.proof else {
            Issue.record("no job: \(outcome)")
            return
        }
        #expect(job.jobID == "google-play-notification-42" && proof.messageID == "42")
        #expect(proof.publishedAt == RFC3339.parse("2026-11-29T12:00:00.500Z"))
        #expect(proof.purchaseToken == "tok-9" && proof.notification == text && job.submittedAt == Self.at)
        // Without a configured package list every package is published (the worker judges the app).
        #expect(intake.packages.isEmpty)
    }

    @Test("a frontend may not use the Google Play notification job ids or account")
    func namespace() {
        let intake = JobIntake()
        let cases: [(String, String)] = [
            (#"{"job_id":"google-play-notification-1","account_id":"a","receipt":"r"}"#, "reserved_id"),
            (#"{"job_id":"Google-Play-Voided-GPA.1","account_id":"a","receipt":"r"}"#, "reserved_id"),
            (#"{"job_id":"google-play-reread-abc","account_id":"a","receipt":"r"}"#, "reserved_id"),
            (#"{"job_id":"j","account_id":"google-play-notification/tok","receipt":"r"}"#, "invalid_value"),
            (
                #"{"job_id":"j","account_id":"google-play-notification","google_play_notification":{"package_name":"p","purchase_token":"t"}}"#,
                "invalid_value"
            ),
        ]
        for (body, code) in cases {
            #expect(throws: GatewayError.self, "\(body)") { try intake.job(fromFrontendJSON: Array(body.utf8)) }
            do {
                _ = try intake.job(fromFrontendJSON: Array(body.utf8))
            } catch {
                #expect(error.code.rawValue == code, "\(body): \(error)")
            }
        }
    }

    @Test("the Pub/Sub keys load through flags; the route is on only with all three")
    func settings() throws {
        let on = try GatewayConfiguration.load(
            arguments: [
                "--auth", "disabled", "--pubsub-audience", "https://gw/push", "--pubsub-service-account", "sa@x",
                "--pubsub-jwks-url", "https://www.googleapis.com/oauth2/v3/certs", "--pubsub-subscription",
                "projects/p/subscriptions/s", "--pubsub-clock-skew-s", "30", "--google-play-packages", "a.b, c.d",
                "--google-play-notification-account", "rtdn",
            ], environment: [:], readFile: { _ in "" })
        #expect(on.googlePlayNotificationsEnabled)
        #expect(on.pubSubAudience == "https://gw/push" && on.pubSubServiceAccount == "sa@x")
        #expect(on.pubSubJWKSURL == "https://www.googleapis.com/oauth2/v3/certs" && on.pubSubJWKSFile == nil)
        #expect(on.pubSubSubscription == "projects/p/subscriptions/s" && on.pubSubClockSkewSeconds == 30)
        #expect(on.googlePlayPackages == ["a.b", "c.d"] && on.googlePlayNotificationAccountID == "rtdn")
        let off = try GatewayConfiguration.load(
            arguments: ["--auth", "disabled"], environment: [:], readFile: { _ in "" })
        #expect(!off.googlePlayNotificationsEnabled && off.pubSubClockSkewSeconds == 60)
        #expect(off.googlePlayNotificationAccountID == "google-play-notification")
        let error = #expect(throws: ConfigurationError.self) {
            _ = try GatewayConfiguration.load(
                arguments: ["--auth", "disabled", "--pubsub-audience", "https://gw/push"], environment: [:],
                readFile: { _ in "" })
        }
        #expect(error?.key == "gateway_pubsub_service_account")
        let skew = #expect(throws: ConfigurationError.self) {
            _ = try GatewayConfiguration.load(
                arguments: ["--auth", "disabled", "--pubsub-clock-skew-s", "3601"], environment: [:],
                readFile: { _ in "" })
        }
        #expect(skew?.key == "gateway_pubsub_clock_skew_s")
    }
}
