import AppleClients
import Foundation
import Logging
import Operations
import Receipts
import SwiftASN1
import Testing
import Worker
import _CryptoExtras

@testable import AppleSimulator

/// The files `verify-worker run` reads at start: the catalog and the trust anchors.
@Suite("Worker start-up inputs")
struct RuntimeInputsTests {
    static func configuration(catalog: String, anchors: [String] = []) throws -> WorkerConfiguration {
        // The ledger beside the catalog: a start-up that gets as far as opening it never writes into the tree.
        let ledger = URL(fileURLWithPath: catalog).deletingLastPathComponent().appendingPathComponent("ledger.sqlite")
        var environment = ["VERIFY_CATALOG_FILE": catalog, "VERIFY_LEDGER_URL": "sqlite:\(ledger.path)"]
        if !anchors.isEmpty { environment["VERIFY_TRUST_ANCHORS"] = anchors.joined(separator: ",") }
        var sources = ConfigurationSources()
        sources.addEnvironment(environment)
        return try WorkerConfiguration(sources, hostName: "test")
    }

    static func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runtime-inputs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    static let goodCatalog = #"{"bundle_ids":["com.example.app"],"products":[{"id":"p","type":"consumable"}]}"#

    @Test("a PEM bundle of several certificates adds every one of them as a trust anchor")
    func pemBundle() throws {
        let pki = try AppleSimHarness.sharedPKI.get()
        try Self.withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(Self.goodCatalog.utf8).write(to: catalog)
            let bundle = directory.appendingPathComponent("bundle.pem")
            let text =
                "# simulator roots\n" + (try pki.rsaRoot.serializeAsPEM().pemString) + "\n"
                + (try pki.ecRoot.serializeAsPEM().pemString) + "\n"
            try Data(text.utf8).write(to: bundle)
            let (_, trust) = try Self.configuration(catalog: catalog.path, anchors: [bundle.path]).loadDecisionInputs()
            #expect(trust.anchors.count == TrustStore.apple.anchors.count + 2)
            #expect(trust.anchors.contains(pki.ecRoot))
            #expect(trust.anchors.contains(pki.rsaRoot))
            #expect(try TrustStore.loadCertificates(contentsOf: bundle).count == 2)

            let der = directory.appendingPathComponent("root.der")
            try Data(pki.jwsRootDER).write(to: der)
            #expect(try TrustStore.loadCertificates(contentsOf: der) == [pki.ecRoot])

            let keyOnly = directory.appendingPathComponent("key.pem")
            try Data("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8).write(to: keyOnly)
            let error = #expect(throws: ConfigurationError.self) {
                try Self.configuration(catalog: catalog.path, anchors: [keyOnly.path]).loadDecisionInputs()
            }
            #expect(error?.key == "trust_anchors")
        }
    }

    @Test(
        "a catalog without products, or one that does not decode, is refused with one short line",
        arguments: [
            (#"{"bundle_ids":["com.example.app"],"products":[]}"#, "no product"),
            (#"{"bundle_ids":["com.example.app"]}"#, "no product"),
            (#"{"bundle_ids":["com.example.app"],"products":[{"id":"p","type":"gem"}]}"#, "products[0].type"),
            (#"{"bundle_ids":["com.example.app"],"products":[{"type":"consumable"}]}"#, "products[0].id is missing"),
            (#"{"bundle_ids":"com.example.app"}"#, "bundle_ids has the wrong type"),
            ("not json", "not JSON"),
        ])
    func badCatalogs(json: String, expected: String) throws {
        try Self.withDirectory { directory in
            let catalog = directory.appendingPathComponent("catalog.json")
            try Data(json.utf8).write(to: catalog)
            let error = #expect(throws: ConfigurationError.self) {
                try Self.configuration(catalog: catalog.path).loadDecisionInputs()
            }
            #expect(error?.key == "catalog_file")
            #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
            #expect(error?.description.contains("\n") == false)
            #expect(error.map { $0.description.count < 200 } == true, "\(String(describing: error))")
        }
    }

    @Test(
        "run reads every Play app's keys at start: a file missing or holding no key is refused in one line naming the app and the file, never its content"
    )
    func playAppKeys() throws {
        try Self.withDirectory { directory in
            let licensing = GooglePlayReadingTests.fixturePath("licensing-key.base64")
            let account = directory.appendingPathComponent("sa.json")
            let pem = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
            let accountJSON: [String: String] = [
                "type": "service_account", "client_email": "reader@example.iam.gserviceaccount.com",
                "private_key_id": "k1", "private_key": pem, "token_uri": "https://oauth2.googleapis.com/token",
            ]
            try JSONSerialization.data(withJSONObject: accountJSON).write(to: account)
            let secretText = directory.appendingPathComponent("secret.txt")
            try Data("SECRET-CONTENT-42".utf8).write(to: secretText)
            func serviceGroup(licensingKey: String, serviceAccount: String) throws {
                let catalog = directory.appendingPathComponent("catalog.json")
                let json =
                    #"{"bundle_ids":["com.example.app"],"products":[{"id":"p","type":"consumable"}],"#
                    + #""play_apps":[{"package_name":"com.example.play","licensing_key_file":"\#(licensingKey)","#
                    + #""service_account_key_file":"\#(serviceAccount)"}],"#
                    + #""play_products":[{"id":"p","type":"consumable"}]}"#
                try Data(json.utf8).write(to: catalog)
                let runtime = WorkerRuntime(
                    configuration: try Self.configuration(catalog: catalog.path), logger: Logger(label: "play-apps"),
                    serveOperations: false)
                _ = try runtime.serviceGroup(health: WorkerHealth(), started: {})
            }
            try serviceGroup(licensingKey: licensing, serviceAccount: account.path)
            let refused: [(licensing: String, account: String, expected: String)] = [
                ("/nonexistent/key", account.path, "licensing_key_file: cannot read /nonexistent/key"),
                (secretText.path, account.path, "licensing_key_file: \(secretText.path) is not a licensing key"),
                (licensing, "/nonexistent/sa.json", "the service-account file /nonexistent/sa.json cannot be read"),
                (licensing, secretText.path, "service_account_key_file:"),
            ]
            for (licensingKey, serviceAccount, expected) in refused {
                let error = #expect(throws: ConfigurationError.self) {
                    try serviceGroup(licensingKey: licensingKey, serviceAccount: serviceAccount)
                }
                #expect(error?.key == "catalog_file")
                #expect(error?.description.contains("com.example.play") == true, "\(String(describing: error))")
                #expect(error?.description.contains(expected) == true, "\(String(describing: error))")
                #expect(error?.description.contains("SECRET-CONTENT") == false)
                #expect(error?.description.contains("\n") == false)
            }
        }
    }
}
