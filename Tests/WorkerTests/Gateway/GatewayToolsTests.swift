import Foundation
import Kafka
import Messages
import SwiftASN1
import Testing

@testable import AppleSimulator

@Suite("Gateway commands: tail of dead letters, inspect's exit status", .timeLimit(.minutes(2)))
struct GatewayToolsTests {
    @Test("tail of the dead-letter topic shows each letter's headers (why it was rejected) with its value")
    func tailShowsDeadLetterHeaders() async throws {
        let cluster = try MockKafkaCluster(brokers: 1)
        try cluster.createTopic(Topics.deadLetters, partitions: 1)
        let letter = DeadLetter(
            original: Array(#"{"job_id":"j-9","receipt":"AAAA"}"#.utf8), key: Array("acct".utf8),
            reason: "missing_field", error: "account_id: required", sourceTopic: Topics.jobs, sourcePartition: 3,
            sourceOffset: 41)
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, lingerMilliseconds: 1)
        )
        _ = try await producer.send(
            KafkaProducerRecord(
                topic: Topics.deadLetters, key: letter.key, value: letter.original,
                headers: letter.headers.map { KafkaHeader(name: $0.name, value: $0.value) }))
        await producer.shutdown()

        let tailed = try await CommandProcess.run([
            "tail", "--brokers", cluster.bootstrapServers, "--topic", Topics.deadLetters, "--from-beginning",
            "--count", "1",
        ])
        #expect(tailed.status == 0, "\(tailed.stderr)")
        let line = try #require(tailed.jsonLines.first, "\(tailed.stdout)")
        let headers = try #require(line["headers"] as? [String: String], "\(tailed.stdout)")
        #expect(headers[DeadLetter.Header.reason] == "missing_field")
        #expect(headers[DeadLetter.Header.error] == "account_id: required")
        #expect(headers[DeadLetter.Header.topic] == Topics.jobs)
        #expect(headers[DeadLetter.Header.offset] == "41")
        #expect(line["value"] as? String == #"{"job_id":"j-9","receipt":"AAAA"}"#)
        #expect(line["offset"] as? Int == 0)
    }

    @Test("inspect exits 0 for a genuine JWS, 1 for a tampered, foreign-signed or malformed one")
    func inspectExitStatus() async throws {
        let pki = try AppleSimHarness.sharedPKI.get()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gateway-inspect-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Both simulator roots in one PEM file: a bundle, as TLS tools write them.
        let bundle = directory.appendingPathComponent("roots.pem")
        let pem = try pki.rsaRoot.serializeAsPEM().pemString + "\n" + pki.ecRoot.serializeAsPEM().pemString + "\n"
        try Data(pem.utf8).write(to: bundle)

        func inspect(_ text: String) async throws -> CommandProcess.Outcome {
            try await CommandProcess.run(["inspect", "--trust-anchor", bundle.path, "-"], stdin: text)
        }
        let genuine = try #require(
            try GatewayTestData.signedNotification(uuid: UUID().uuidString)["signedPayload"] as? String)
        let ok = try await inspect(genuine)
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains(#""valid""#), "\(ok.stdout)")

        let other = try #require(
            try GatewayTestData.signedNotification(uuid: UUID().uuidString)["signedPayload"] as? String)
        let parts = genuine.split(separator: ".")
        let tampered = [parts[0], other.split(separator: ".")[1], parts[2]].joined(separator: ".")
        let forged = try await inspect(tampered)
        #expect(forged.status == 1, "\(forged.stderr)")
        #expect(forged.stderr.contains("signature invalid"), "\(forged.stderr)")
        #expect(!forged.stdout.isEmpty, "the analysis is still printed")

        let foreign = try #require(
            try GatewayTestData.signedNotification(
                uuid: UUID().uuidString, pki: try GatewayTestData.foreignPKI.get())["signedPayload"] as? String)
        let untrusted = try await inspect(foreign)
        #expect(untrusted.status == 1, "\(untrusted.stderr)")

        let malformed = try await inspect("not a receipt at all")
        #expect(malformed.status == 1)
    }

    @Test("inspect --allow-xcode exits 0 for Xcode app receipts and JWS, as its help says; 1 without the flag")
    func inspectXcode() async throws {
        for fixture in [
            "apple-swift/xcode/xcode-app-receipt-with-transaction", "tpinappreceipt/receipt-xcode",
            "apple-swift/xcode/xcode-signed-transaction",
        ] {
            let path = TestEnvironment.fixturesDirectory.appendingPathComponent(fixture).path
            let allowed = try await CommandProcess.run(["inspect", "--allow-xcode", path])
            #expect(allowed.status == 0, "\(fixture): \(allowed.stderr)")
            #expect(allowed.stdout.contains(#""not_checked""#), "\(fixture): \(allowed.stdout)")
            if !fixture.contains("signed-transaction") {
                let refused = try await CommandProcess.run(["inspect", path])
                #expect(refused.status == 1, "\(fixture): \(refused.stderr)")
            }
        }
    }
}
