import Crypto
import Foundation
import Ledger
import Messages
import Testing
import Worker

@testable import AppleSimulator

/// With `consumption_answers`, each CONSUMPTION_REQUEST notification gets exactly one Send Consumption
/// Information call, built from the ledger, through workers on the mock cluster and a fake Server API.
@Suite("Pipeline: consumption answers", .serialized, .timeLimit(.minutes(3)))
struct ConsumptionAnswerTests {
    static func path(_ transactionID: String) -> String { "/inApps/v2/transactions/consumption/\(transactionID)" }

    static func settings(base: String, consented: Bool) -> (extra: [String: String], environment: [String: String]) {
        (
            [
                "consumption_answers": "true", "consumption_customer_consented": consented ? "true" : "false",
                "server_api_production_url": base, "server_api_sandbox_url": base + "/sandbox",
                "server_api_key_id": "KEY123", "server_api_issuer_id": "issuer-uuid",
            ],
            ["VERIFY_SERVER_API_KEY": P256.Signing.PrivateKey().pemRepresentation]
        )
    }

    /// A CONSUMPTION_REQUEST for `transactionID`, signed by the simulator's chain, as the gateway makes its job.
    static func request(
        _ harness: PipelineHarness, transactionID: String, uuid: String = UUID().uuidString.lowercased()
    ) throws -> ReceiptJob {
        let transaction = try #require(harness.simulator.transaction(transactionID))
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let signed = try SimulatedJWS.signTransaction(transaction, pki: harness.simulator.pki, nowMs: nowMs)
        let notification = try SimulatedJWS.sign(
            PipelineNotificationTests.NotificationPayload(
                notificationType: "CONSUMPTION_REQUEST", notificationUUID: uuid, signedDate: nowMs,
                data: PipelineNotificationTests.NotificationData(
                    bundleId: PipelineHarness.bundleID, signedTransactionInfo: signed)),
            pki: harness.simulator.pki)
        return ReceiptJob(
            jobID: "notification-" + uuid, accountID: "apple-notification", proof: .notification(notification))
    }

    /// A consumable purchase the simulator minted and nobody was granted: its transaction id.
    static func stranger(_ harness: PipelineHarness) throws -> String {
        try harness.simulator.mint(
            MintRequest(
                bundleId: PipelineHarness.bundleID, productId: PipelineHarness.consumable, format: .signedTransaction,
                environment: .production)
        ).transaction.transactionId
    }

    static func record(_ harness: PipelineHarness, _ key: String) async throws -> FollowUpRecord? {
        try await LedgerFactory.withLedger(url: harness.ledgerURL) { ledger in
            try await ledger.followUpRecord(kind: .consumptionInformation, key: key)
        }
    }

    @Test("one answer per request across a redelivery: DELIVERED for a granted purchase, not revoked")
    func oneAnswerPerRequest() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await PipelineHarness.with { harness in
                let on = Self.settings(base: base, consented: true)
                try harness.startWorker(0, extra: on.extra, environment: on.environment)
                try await harness.waitUntilAssigned()
                let (purchase, granted) = try harness.genuineJob(
                    account: "acct-consumption", format: .signedTransaction)
                try await harness.submit([purchase])
                try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
                #expect(harness.verdicts.byJob[purchase.jobID]?.first?.outcome == .granted)
                server.setFallback(Self.path(granted), .init(status: 202))

                let request = try Self.request(harness, transactionID: granted)
                // Apple's retry of the same notification is the same job; the gateway may publish it twice.
                try await harness.submit([request, request])
                try await harness.verdicts.waitForVerdicts(of: [request.jobID])
                try await PipelineHarness.poll("the answer recorded as sent") {
                    try await Self.record(harness, request.jobID)?.state == .sent
                }
                // A purchase nobody was granted: its request is answered UNDELIVERED_OTHER; it comes after the
                // redelivered one on the same key, so once it is recorded the redelivery has been handled too.
                let stranger = try Self.stranger(harness)
                server.setFallback(Self.path(stranger), .init(status: 202))
                let strangerRequest = try Self.request(harness, transactionID: stranger)
                try await harness.submit([request, strangerRequest])
                try await harness.verdicts.waitForVerdicts(of: [strangerRequest.jobID])
                try await PipelineHarness.poll("the second answer recorded as sent") {
                    try await Self.record(harness, strangerRequest.jobID)?.state == .sent
                }

                let answers = server.received(path: Self.path(granted))
                #expect(answers.count == 1)
                let body = try #require(answers.first?.jsonBody)
                #expect(answers.first?.method == "PUT")
                #expect(body["customerConsented"] as? Bool == true)
                #expect(body["deliveryStatus"] as? String == "DELIVERED")
                #expect(body["sampleContentProvided"] as? Bool == false)
                let other = try #require(server.received(path: Self.path(stranger)).first?.jsonBody)
                #expect(other["deliveryStatus"] as? String == "UNDELIVERED_OTHER")
                #expect(server.received(path: Self.path(stranger)).count == 1)
            }
        }
    }

    @Test("without the customer's consent nothing is sent and the ledger says not_sent")
    func noConsentNoCall() async throws {
        try await AppleClientsFakeServer.withRunning { server, base in
            try await PipelineHarness.with { harness in
                let off = Self.settings(base: base, consented: false)
                try harness.startWorker(0, extra: off.extra, environment: off.environment)
                try await harness.waitUntilAssigned()
                let (purchase, granted) = try harness.genuineJob(account: "acct-no-consent", format: .signedTransaction)
                try await harness.submit([purchase])
                try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
                let request = try Self.request(harness, transactionID: granted)
                try await harness.submit([request])
                try await harness.verdicts.waitForVerdicts(of: [request.jobID])
                try await PipelineHarness.poll("the request recorded as not sent") {
                    try await Self.record(harness, request.jobID)?.state == .notSent
                }
                #expect(server.received().isEmpty)
            }
        }
    }
    @Test("the refund policy answers: its rule's preference is sent, no_response sends nothing; each records its rule")
    func policyAnswers() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "consumption-policy-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let policy = directory.appendingPathComponent("refunds.json")
        try Data(
            #"""
            {"rules":[
              {"name":"held-decline","store":"app_store","delivered":true,"answer":"no_refund"},
              {"name":"never-delivered","delivered":false,"answer":"no_response"}
            ]}
            """#.utf8
        ).write(to: policy)
        try await AppleClientsFakeServer.withRunning { server, base in
            try await PipelineHarness.with { harness in
                var on = Self.settings(base: base, consented: true)
                on.extra["refund_policy_file"] = policy.path
                try harness.startWorker(0, extra: on.extra, environment: on.environment)
                try await harness.waitUntilAssigned()
                let (purchase, granted) = try harness.genuineJob(account: "acct-policy", format: .signedTransaction)
                try await harness.submit([purchase])
                try await harness.verdicts.waitForVerdicts(of: [purchase.jobID])
                server.setFallback(Self.path(granted), .init(status: 202))
                let stranger = try Self.stranger(harness)
                server.setFallback(Self.path(stranger), .init(status: 202))
                let request = try Self.request(harness, transactionID: granted)
                let strangerRequest = try Self.request(harness, transactionID: stranger)
                try await harness.submit([request, strangerRequest])
                try await harness.verdicts.waitForVerdicts(of: [request.jobID, strangerRequest.jobID])
                try await PipelineHarness.poll("both requests recorded") {
                    let sent = try await Self.record(harness, request.jobID)?.state == .sent
                    let notSent = try await Self.record(harness, strangerRequest.jobID)?.state == .notSent
                    return sent && notSent
                }
                #expect(try await Self.record(harness, request.jobID)?.detail == "rule held-decline")
                #expect(
                    try await Self.record(harness, strangerRequest.jobID)?.detail
                        == "rule never-delivered: no_response")
                let body = try #require(server.received(path: Self.path(granted)).first?.jsonBody)
                #expect(body["refundPreference"] as? String == "DECLINE")
                #expect(body["deliveryStatus"] as? String == "DELIVERED")
                #expect(server.received(path: Self.path(granted)).count == 1)
                #expect(server.received(path: Self.path(stranger)).isEmpty)
            }
        }
    }
}
