import Foundation
import Gateway
import Messages
import Testing

@Suite("Gateway: job intake")
struct GatewayIntakeTests {
    let intake = JobIntake(makeJobID: { "generated" }, now: { Date(timeIntervalSince1970: 1_800_000_000) })

    @Test("missing job_id and schema are filled in; the frontend's own bytes are kept")
    func fillsIn() throws {
        let job = try intake.job(fromFrontendJSON: Array(#"  { "account_id": "a", "receipt": "r" }"#.utf8))
        #expect(job.jobID == "generated")
        #expect(job.accountID == "a")
        let empty = #expect(throws: GatewayError.self) { try intake.job(fromFrontendJSON: Array("{ }".utf8)) }
        #expect(empty?.code == .missingField)
        let given = try intake.job(
            fromFrontendJSON: Array(#"{"job_id":"j","schema":"receipt-job/v1","account_id":"a","receipt":"r"}"#.utf8))
        #expect(given.jobID == "j")
    }

    @Test("submitted_at is stamped by the gateway when the frontend sent none, and kept when it did")
    func stampsSubmittedAt() throws {
        let stamped = try intake.job(fromFrontendJSON: Array(#"{"account_id":"a","receipt":"r"}"#.utf8))
        #expect(stamped.submittedAt == Date(timeIntervalSince1970: 1_800_000_000))
        let kept = try intake.job(
            fromFrontendJSON: Array(#"{"account_id":"a","receipt":"r","submitted_at":"2026-01-02T03:04:05Z"}"#.utf8))
        #expect(kept.submittedAt == Date(timeIntervalSince1970: 1_767_323_045))
    }

    @Test("job_id: null counts as absent; a non-string job_id is refused")
    func nullJobID() throws {
        #expect(
            try intake.job(fromFrontendJSON: Array(#"{"job_id":null,"account_id":"a","receipt":"r"}"#.utf8)).jobID
                == "generated")
        let error = #expect(throws: GatewayError.self) {
            try intake.job(fromFrontendJSON: Array(#"{"job_id":7,"account_id":"a","receipt":"r"}"#.utf8))
        }
        #expect(error?.code == .wrongType)
        #expect(error?.httpStatus == 400)
    }

    @Test("a notification's job id comes from its notificationUUID, its account is the configured one")
    func notification() throws {
        let payload = try GatewayTestData.notification(uuid: "ABC-123")
        let body = Array(try JSONSerialization.data(withJSONObject: payload))
        let job = try intake.job(fromNotificationJSON: body)
        #expect(job.jobID == "apple-notification-abc-123")
        #expect(job.accountID == "apple-notification")
        #expect(job.submittedAt == Date(timeIntervalSince1970: 1_800_000_000))
        #expect(try intake.job(fromNotificationJSON: body) == job)
    }

    @Test("errors never quote the request's values")
    func errorsDoNotLeak() throws {
        let secret = "MIIsecretreceiptbytes"
        let error = #expect(throws: GatewayError.self) {
            try intake.job(
                fromFrontendJSON: Array(#"{"account_id":"a","receipt":"\#(secret)","notification":"x"}"#.utf8))
        }
        #expect(error.map { !String(decoding: $0.jsonBody, as: UTF8.self).contains(secret) } == true)
    }

    @Test("oversized bodies are refused before parsing")
    func oversized() {
        let small = JobIntake(codec: MessageCodec(maximumMessageBytes: 10))
        let error = #expect(throws: GatewayError.self) {
            try small.job(fromFrontendJSON: Array(#"{"account_id":"a","receipt":"r"}"#.utf8))
        }
        #expect(error?.httpStatus == 413)
    }

    @Test("the health probe accepts only plain HTTP to this host and 200 only")
    func healthProbeRules() {
        #expect(HealthProbe.problem(with: "http://127.0.0.1:9464/readyz") == nil)
        #expect(HealthProbe.problem(with: "http://localhost:8443/sim/stats") == nil)
        #expect(HealthProbe.problem(with: "http://[::1]:1/") == nil)
        #expect(HealthProbe.problem(with: "https://127.0.0.1/") != nil)
        #expect(HealthProbe.problem(with: "http://example.com/") != nil)
        #expect(HealthProbe.assessment(url: "u", status: 200, body: Array("ready\n".utf8)).isHealthy)
        #expect(!HealthProbe.assessment(url: "u", status: 503, body: Array("not ready: x\n".utf8)).isHealthy)
    }
}
