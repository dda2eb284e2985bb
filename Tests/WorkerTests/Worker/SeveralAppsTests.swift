import AppleClients
import CodedErrors
import Crypto
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Operations
import RateLimiter
import Receipts
import Reconciler
import StoreHTTP
import Testing
import Worker

@testable import AppleSimulator

/// A deployment of two apps: each app's shared secret and Server API key in its own file, and a catalog
/// that names the files.
struct SeveralAppsFiles {
    static let appA = "com.example.alpha"
    static let appB = "com.example.beta"
    /// Not in the catalog.
    static let appC = "com.example.gamma"
    static let appleIDA: Int64 = 1_111_111_111
    static let appleIDB: Int64 = 2_222_222_222
    static let consumable = "coins.100"

    let directory: URL
    let secretA = "alpha-secret-\(UUID().uuidString)"
    let secretB = "beta-secret-\(UUID().uuidString)"
    let keyA = P256.Signing.PrivateKey()
    let keyB = P256.Signing.PrivateKey()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "several-apps-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try write("secret-a", secretA + "\n")
        try write("secret-b", secretB + "\n")
        try write("key-a.p8", keyA.pemRepresentation)
        try write("key-b.p8", keyB.pemRepresentation)
        try write("empty", "")
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func write(_ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: directory.appendingPathComponent(name))
    }

    /// One app's catalog entry, its files named by `suffix` ("a" or "b").
    func app(_ bundleID: String, appleID: Int64, suffix: String) -> [String: Any] {
        [
            "bundle_id": bundleID, "app_apple_id": appleID, "shared_secret_file": path("secret-\(suffix)"),
            "server_api": [
                "key_id": "KEY\(suffix.uppercased())", "issuer_id": "issuer-\(suffix)",
                "private_key_file": path("key-\(suffix).p8"),
            ],
        ]
    }

    /// Apps A and B as the simulator plays them: each with its secret and the public half of its Server API key.
    var simulatedApps: [SimulatedApp] {
        [
            SimulatedApp(
                bundleId: Self.appA, appAppleId: Self.appleIDA, sharedSecret: secretA, apiPublicKey: keyA.publicKey),
            SimulatedApp(
                bundleId: Self.appB, appAppleId: Self.appleIDB, sharedSecret: secretB, apiPublicKey: keyB.publicKey),
        ]
    }

    /// The catalog of apps A and B, as JSON objects `change` may alter.
    func catalog(_ change: (inout [String: Any], inout [[String: Any]]) -> Void = { _, _ in }) -> [String: Any] {
        var apps = [
            app(Self.appA, appleID: Self.appleIDA, suffix: "a"), app(Self.appB, appleID: Self.appleIDB, suffix: "b"),
        ]
        var object: [String: Any] = ["products": [["id": Self.consumable, "type": "consumable"]]]
        change(&object, &apps)
        if object["apps"] == nil { object["apps"] = apps }
        return object
    }

    /// Writes `object` as the catalog file; returns its path.
    func writeCatalog(_ object: [String: Any]) throws -> String {
        try Data(JSONSerialization.data(withJSONObject: object)).write(to: directory.appendingPathComponent("cat.json"))
        return path("cat.json")
    }

    /// The worker's configuration for the catalog at `catalog` plus `environment`.
    static func configuration(catalog: String, environment: [String: String] = [:]) throws -> WorkerConfiguration {
        var sources = ConfigurationSources()
        sources.addEnvironment(environment.merging(["VERIFY_CATALOG_FILE": catalog]) { first, _ in first })
        return try WorkerConfiguration(sources, hostName: "test")
    }

    /// What the worker reads at start for `object`: the catalog, then each app's credentials.
    func load(
        _ object: [String: Any], environment: [String: String] = [:]
    ) throws -> (Catalog, AppCredentials) {
        let configuration = try Self.configuration(catalog: try writeCatalog(object), environment: environment)
        let (catalog, _) = try configuration.loadDecisionInputs()
        return (catalog, try AppCredentials.load(catalog: catalog, configuration: configuration))
    }

    /// Values that must never appear in an error or a log line: both secrets and every line of both keys.
    var secrets: [(name: String, value: String)] {
        var secrets = [("secret A", secretA), ("secret B", secretB)]
        for (name, key) in [("key A", keyA), ("key B", keyB)] {
            for line in key.pemRepresentation.split(separator: "\n") where !line.hasPrefix("-----") {
                secrets.append((name, String(line)))
            }
        }
        return secrets
    }
}

@Suite("Several apps: configuration")
struct SeveralAppsConfigurationTests {
    @Test("two apps parse: each with its bundle id, Apple id, shared secret and Server API key read from its files")
    func twoApps() throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let (catalog, credentials) = try files.load(files.catalog())
        #expect(catalog.bundleIDs == [SeveralAppsFiles.appA, SeveralAppsFiles.appB])
        #expect(catalog.apps.map(\.bundleID) == [SeveralAppsFiles.appA, SeveralAppsFiles.appB])
        #expect(catalog.apps[1].serverAPI?.keyID == "KEYB")
        #expect(credentials.listedInCatalog)
        let beta = credentials.apps[1]
        #expect(beta.bundleID == SeveralAppsFiles.appB)
        #expect(beta.appAppleID == SeveralAppsFiles.appleIDB)
        #expect(beta.sharedSecret?.value == files.secretB)
        #expect(beta.serverAPIKey?.bundleID == SeveralAppsFiles.appB)
        #expect(credentials.apps[0].sharedSecret?.value == files.secretA)
        // The catalog written back names the files, never their content, and reads back the same.
        let encoded = String(decoding: try JSONEncoder().encode(catalog), as: UTF8.self)
        #expect(files.secrets.allSatisfy { !encoded.contains($0.value) })
        #expect(try Catalog.load(json: Data(encoded.utf8)) == catalog)
    }

    @Test("today's single-app keys are the catalog with one app, serving every bundle id it lists")
    func singleApp() throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let object: [String: Any] = [
            "bundle_ids": ["com.example.two", "com.example.one"],
            "products": [["id": SeveralAppsFiles.consumable, "type": "consumable"]],
        ]
        let (_, credentials) = try files.load(
            object,
            environment: [
                "VERIFY_SHARED_SECRET_FILE": files.path("secret-a"), "VERIFY_APPLE_APP_APPLE_ID": "42",
                "VERIFY_SERVER_API_KEY_FILE": files.path("key-a.p8"), "VERIFY_SERVER_API_KEY_ID": "K",
                "VERIFY_SERVER_API_ISSUER_ID": "I",
            ])
        #expect(!credentials.listedInCatalog)
        #expect(credentials.apps.count == 1)
        #expect(credentials.apps[0].sharedSecret?.value == files.secretA)
        #expect(credentials.apps[0].appAppleID == 42)
        // The token's `bid` is the first bundle id in sorted order, as before.
        #expect(credentials.apps[0].serverAPIKey?.bundleID == "com.example.one")
    }

    @Test("every app field wrong in turn is a configuration error naming the key or file, never a secret")
    func eachFieldWrong() throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let cases: [(String, [String: Any], [String: String], String)] = [
            (
                "missing secret file",
                files.catalog { _, apps in apps[1]["shared_secret_file"] = files.path("nowhere") }, [:],
                "apps[1] (com.example.beta).shared_secret_file: cannot read \(files.path("nowhere"))"
            ),
            (
                "empty secret file", files.catalog { _, apps in apps[0]["shared_secret_file"] = files.path("empty") },
                [:], "apps[0] (com.example.alpha).shared_secret_file: \(files.path("empty")) is empty"
            ),
            (
                "unreadable key (a secret, not a key)",
                files.catalog { _, apps in
                    apps[1]["server_api"] = [
                        "key_id": "K", "issuer_id": "I", "private_key_file": files.path("secret-b"),
                    ]
                }, [:],
                "apps[1] (com.example.beta).server_api.private_key_file: \(files.path("secret-b")) is not a P-256 "
                    + "private key"
            ),
            (
                "missing key file",
                files.catalog { _, apps in
                    apps[0]["server_api"] = ["key_id": "K", "issuer_id": "I", "private_key_file": files.path("none")]
                }, [:], "server_api.private_key_file: cannot read \(files.path("none"))"
            ),
            (
                "no key id",
                files.catalog { _, apps in
                    apps[0]["server_api"] = ["issuer_id": "I", "private_key_file": files.path("key-a.p8")]
                }, [:], "apps[0].server_api.key_id is missing"
            ),
            (
                "duplicate bundle id", files.catalog { _, apps in apps[1]["bundle_id"] = SeveralAppsFiles.appA }, [:],
                "apps[1].bundle_id com.example.alpha is listed twice"
            ),
            (
                "duplicate app_apple_id",
                files.catalog { _, apps in apps[1]["app_apple_id"] = SeveralAppsFiles.appleIDA }, [:],
                "apps[1].app_apple_id 1111111111 is listed twice"
            ),
            (
                "app_apple_id not a number", files.catalog { _, apps in apps[0]["app_apple_id"] = "one" }, [:],
                "apps[0].app_apple_id must be a positive whole number"
            ),
            (
                "app_apple_id true", files.catalog { _, apps in apps[0]["app_apple_id"] = true }, [:],
                "apps[0].app_apple_id must be a positive whole number"
            ),
            (
                "empty bundle id", files.catalog { _, apps in apps[0]["bundle_id"] = "" }, [:],
                "apps[0].bundle_id must be a string"
            ),
            ("no apps", files.catalog { object, _ in object["apps"] = [Any]() }, [:], "apps is empty"),
            (
                "a secret inline", files.catalog { _, apps in apps[0]["shared_secret"] = files.secretA }, [:],
                "apps[0].shared_secret: the catalog names secrets by file only"
            ),
            (
                "a bundle id without its app",
                files.catalog { object, _ in object["bundle_ids"] = [SeveralAppsFiles.appA, SeveralAppsFiles.appC] },
                [:], "bundle_ids names com.example.gamma, which apps does not list"
            ),
            (
                "today's shared secret next to apps", files.catalog(),
                ["VERIFY_SHARED_SECRET_FILE": files.path("secret-a")], "shared_secret: the catalog lists apps"
            ),
        ]
        for (name, object, environment, expected) in cases {
            let error = #expect(throws: ConfigurationError.self, "\(name)") {
                try files.load(object, environment: environment)
            }
            let text = error.map { "\($0)" } ?? ""
            #expect(text.contains(expected), "\(name): \(text)")
            #expect(error?.key == (name.hasPrefix("today's") ? "shared_secret" : "catalog_file"), "\(name)")
            for secret in files.secrets { #expect(!text.contains(secret.value), "\(name) shows \(secret.name)") }
        }
    }
}

@Suite("Several apps: verification", .timeLimit(.minutes(2)))
struct SeveralAppsVerificationTests {
    /// A processor over apps A and B (their own secrets and keys, as the worker builds them from the catalog) and a
    /// simulator that acts as Apple for both, with every log line captured.
    struct Deployment {
        var files: SeveralAppsFiles
        var simulator: AppleSimulator
        var processor: JobProcessor
        var base: String
        var capture: SecurityLogCapture
        var engine: CurlHTTPEngine

        func mint(
            _ bundleID: String, format: SimulatedReceiptFormat = .appReceipt
        ) throws -> (receipt: String, transactionID: String) {
            let minted = try simulator.mint(
                MintRequest(
                    bundleId: bundleID, productId: SeveralAppsFiles.consumable, format: format,
                    environment: .production))
            return (minted.receipt, minted.transaction.transactionId)
        }

        func process(_ proof: ReceiptJob.Proof, bundleID: String? = nil) async throws -> Verdict {
            let job = ReceiptJob(
                jobID: "job-" + UUID().uuidString.lowercased(), accountID: "acct-" + UUID().uuidString.prefix(8),
                proof: proof, bundleID: bundleID)
            return try await processor.decide(job).verdict
        }
    }

    static func withDeployment(_ body: @Sendable (Deployment) async throws -> Void) async throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let capture = SecurityLogCapture()
        var simulatorConfiguration = AppleSimulatorConfiguration()
        simulatorConfiguration.pki = try AppleSimHarness.sharedPKI.get()
        simulatorConfiguration.logger = capture.logger("apple-sim")
        simulatorConfiguration.apps = files.simulatedApps
        let simulator = try AppleSimulator(configuration: simulatorConfiguration)
        let server = Task { try await simulator.run() }
        defer { server.cancel() }
        let base = "http://127.0.0.1:\(try await simulator.waitUntilReady())"

        let (catalog, credentials) = try files.load(files.catalog())
        let logger = capture.logger("worker")
        let analyzer = ReceiptAnalyzer(
            trust: TrustStore.apple.adding(anchors: [simulator.pki.rsaRoot, simulator.pki.ecRoot]),
            isWorthVerifying: ProofPolicy(catalog: catalog).isWorthVerifying(bundleID:))
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let apps = AppleAppClients(
            credentials: credentials, transport: engine, verifyReceipt: .endpoints(base: base),
            serverAPI: AppStoreServerAPIConfiguration(productionBaseURL: base, sandboxBaseURL: base + "/sandbox"),
            analyzer: analyzer, logger: logger)
        let url = try LedgerTestSupport.freshURL(.sqlite)
        defer { LedgerTestSupport.removeFiles(of: url) }
        try await LedgerFactory.withLedger(url: url, configuration: LedgerTestSupport.patient) { ledger in
            let processor = JobProcessor(
                analyzer: analyzer, ledger: ledger,
                apple: AppleCaller(
                    gate: AppleCallGate(clock: ContinuousClock()), retryPolicy: RetryPolicy(maximumAttempts: 3),
                    logger: logger),
                verifyReceipt: apps.apps[0].verifyReceipt, serverAPI: apps.apps[0].serverAPI,
                configuration: JobProcessor.Configuration(
                    catalog: catalog, allowSandbox: false, jobDeadline: .seconds(20)),
                health: WorkerHealth(), logger: logger, apps: apps)
            try await body(
                Deployment(
                    files: files, simulator: simulator, processor: processor, base: base, capture: capture,
                    engine: engine))
        }
    }

    @Test("app B's receipt is verified with B's shared secret; A's secret for it is Apple's 21004")
    func receiptOfB() async throws {
        try await Self.withDeployment { deployment in
            let (receipt, transactionID) = try deployment.mint(SeveralAppsFiles.appB)
            let verdict = try await deployment.process(.receipt(receipt))
            #expect(verdict.outcome == .granted, "\(verdict.outcome) \(verdict.reason.map { "\($0)" } ?? "")")
            #expect(verdict.decidedBy == .apple)
            #expect(verdict.transactions.map(\.transactionID) == [transactionID])
            #expect(deployment.simulator.stats.snapshot().statuses["21004"] == nil)
            // The simulator holds B's receipt to B's secret: A's is refused (so the grant above used B's).
            let withA = VerifyReceiptClient(
                transport: deployment.engine,
                configuration: .endpoints(
                    base: deployment.base, sharedSecret: AppleSharedSecret(deployment.files.secretA)),
                logger: deployment.capture.logger("control"))
            let answer = try await withA.verify(receiptData: receipt)
            #expect(answer.answer?.status == .sharedSecretMismatch)
            // And A's receipt goes with A's secret.
            let (receiptA, _) = try deployment.mint(SeveralAppsFiles.appA)
            #expect(try await deployment.process(.receipt(receiptA)).outcome == .granted)
        }
    }

    @Test("app B's transaction id is looked up with B's key (token bid B); A's key gets Apple's 404 for it")
    func transactionOfB() async throws {
        try await Self.withDeployment { deployment in
            let (_, named) = try deployment.mint(SeveralAppsFiles.appB, format: .signedTransaction)
            let byName = try await deployment.process(.transactionID(named), bundleID: SeveralAppsFiles.appB)
            #expect(byName.outcome == .granted, "\(byName.outcome) \(byName.reason.map { "\($0)" } ?? "")")
            #expect(byName.transactions.map(\.transactionID) == [named])
            // Without a bundle id, A is asked first (404: not A's transaction), then B.
            let (_, unnamed) = try deployment.mint(SeveralAppsFiles.appB, format: .signedTransaction)
            let before = deployment.simulator.stats.snapshot().statuses["4040010"] ?? 0
            let byTrying = try await deployment.process(.transactionID(unnamed))
            #expect(byTrying.outcome == .granted, "\(byTrying.outcome) \(byTrying.reason.map { "\($0)" } ?? "")")
            #expect((deployment.simulator.stats.snapshot().statuses["4040010"] ?? 0) > before)
            // A job naming A for B's transaction: A's key sees no such transaction.
            let (_, other) = try deployment.mint(SeveralAppsFiles.appB, format: .signedTransaction)
            let wrong = try await deployment.process(.transactionID(other), bundleID: SeveralAppsFiles.appA)
            #expect(wrong.outcome != .granted)
        }
    }

    @Test("app C's receipt and transaction are rejected as another app's, without asking Apple")
    func otherApp() async throws {
        try await Self.withDeployment { deployment in
            let callsBefore = deployment.simulator.stats.snapshot().statuses.values.reduce(0, +)
            let (receipt, _) = try deployment.mint(SeveralAppsFiles.appC)
            let verdict = try await deployment.process(.receipt(receipt))
            #expect(verdict.outcome == .rejected && verdict.reason == .wrongBundle, "\(verdict.reason as Any)")
            let (jws, _) = try deployment.mint(SeveralAppsFiles.appC, format: .signedTransaction)
            let signed = try await deployment.process(.signedTransaction(jws))
            #expect(signed.outcome == .rejected && signed.reason == .wrongBundle, "\(signed.reason as Any)")
            #expect(deployment.simulator.stats.snapshot().statuses.values.reduce(0, +) == callsBefore)
            // A bare transaction id of a job that names app C: every app is asked, and B's transaction is not C's.
            let (_, transactionID) = try deployment.mint(SeveralAppsFiles.appB, format: .signedTransaction)
            let named = try await deployment.process(.transactionID(transactionID), bundleID: SeveralAppsFiles.appC)
            #expect(named.outcome == .rejected && named.reason == .wrongBundle, "\(named.reason as Any)")
        }
    }

    @Test("a notification of app B is held to B's appAppleId: B's passes, A's is wrong_app")
    func notificationOfB() async throws {
        try await Self.withDeployment { deployment in
            let (_, transactionID) = try deployment.mint(SeveralAppsFiles.appB, format: .signedTransaction)
            let transaction = try #require(deployment.simulator.transaction(transactionID))
            func notification(appAppleID: Int64) throws -> ReceiptJob.Proof {
                let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
                return .notification(
                    try SimulatedJWS.sign(
                        SeveralAppsNotification(
                            notificationType: "REFUND", notificationUUID: UUID().uuidString.lowercased(),
                            signedDate: nowMs,
                            data: .init(
                                appAppleId: appAppleID, bundleId: SeveralAppsFiles.appB,
                                signedTransactionInfo: try SimulatedJWS.signTransaction(
                                    transaction, pki: deployment.simulator.pki, nowMs: nowMs))),
                        pki: deployment.simulator.pki))
            }
            let asA = try await deployment.process(try notification(appAppleID: SeveralAppsFiles.appleIDA))
            #expect(asA.outcome == .rejected && asA.reason == .wrongApp, "\(asA.reason as Any)")
            let asB = try await deployment.process(try notification(appAppleID: SeveralAppsFiles.appleIDB))
            #expect(asB.reason != .wrongApp, "\(asB.reason as Any)")
        }
    }

    @Test("no secret or private key of either app reaches a log line, with both apps in use")
    func noSecretInLogs() async throws {
        try await Self.withDeployment { deployment in
            for app in [SeveralAppsFiles.appA, SeveralAppsFiles.appB] {
                let (receipt, _) = try deployment.mint(app)
                _ = try await deployment.process(.receipt(receipt))
                let (_, transactionID) = try deployment.mint(app, format: .signedTransaction)
                _ = try await deployment.process(.transactionID(transactionID))
            }
            _ = try await deployment.process(.transactionID("1999999999999999"))
            #expect(!deployment.capture.lines.isEmpty)
            let leaks = deployment.capture.leaks(of: deployment.files.secrets)
            #expect(leaks.isEmpty, "\(leaks.prefix(3))")
        }
    }
}

@Suite("Several apps: worker", .serialized, .timeLimit(.minutes(3)))
struct SeveralAppsWorkerTests {
    @Test("a worker started from a two-app catalog grants B's receipt with B's secret, finishes it with B's key")
    func worker() async throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let apps = [
            SimulatedApp(
                bundleId: SeveralAppsFiles.appA, appAppleId: SeveralAppsFiles.appleIDA, sharedSecret: files.secretA,
                apiPublicKey: files.keyA.publicKey),
            SimulatedApp(
                bundleId: SeveralAppsFiles.appB, appAppleId: SeveralAppsFiles.appleIDB, sharedSecret: files.secretB,
                apiPublicKey: files.keyB.publicKey),
        ]
        try await PipelineHarness.with(simulatorApps: apps) { harness in
            let base = "http://127.0.0.1:\(harness.port)"
            try harness.startWorker(
                0,
                extra: [
                    "catalog_file": try files.writeCatalog(files.catalog()), "finish_transactions": "true",
                    "server_api_production_url": base, "server_api_sandbox_url": base + "/sandbox",
                ])
            try await harness.waitUntilAssigned()
            func job(_ bundleID: String) throws -> (ReceiptJob, String) {
                let minted = try harness.simulator.mint(
                    MintRequest(
                        bundleId: bundleID, productId: SeveralAppsFiles.consumable, format: .appReceipt,
                        environment: .production))
                let job = ReceiptJob(
                    jobID: "job-" + UUID().uuidString.lowercased(), accountID: "acct-" + bundleID,
                    proof: .receipt(minted.receipt), submittedAt: Date())
                return (job, minted.transaction.transactionId)
            }
            let (beta, betaTransaction) = try job(SeveralAppsFiles.appB)
            let (gamma, _) = try job(SeveralAppsFiles.appC)
            try await harness.submit([beta, gamma])
            try await harness.verdicts.waitForVerdicts(of: [beta.jobID, gamma.jobID])
            let granted = try #require(harness.verdicts.byJob[beta.jobID]?.first)
            #expect(granted.outcome == .granted, "\(granted.outcome) \(granted.reason as Any)")
            #expect(harness.verdicts.byJob[gamma.jobID]?.first?.reason == .wrongBundle)
            #expect(harness.simulator.stats.snapshot().statuses["21004"] == nil)
            // Finish Transaction: A's key is answered 404 (not A's transaction), B's is accepted.
            try await PipelineHarness.poll("B's transaction finished") {
                try await FinishTransactionTests.record(harness, betaTransaction)?.state == .sent
            }
        }
    }
}

@Suite("Several apps: simulator from a catalog")
struct SeveralAppsSimulatorCatalogTests {
    @Test("apple-sim --apps-catalog: each app's secret from its file, its key's public half, its app id")
    func fromCatalog() throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let (catalog, _) = try files.load(files.catalog { _, apps in apps[1]["app_apple_id"] = nil })
        let apps = try SimulatedApp.apps(of: catalog, defaultAppAppleId: 7)
        #expect(apps.map(\.bundleId) == [SeveralAppsFiles.appA, SeveralAppsFiles.appB])
        #expect(apps.map(\.appAppleId) == [SeveralAppsFiles.appleIDA, 7])
        #expect(apps.map(\.sharedSecret) == [files.secretA, files.secretB])
        #expect(apps[1].apiPublicKey?.rawRepresentation == files.keyB.publicKey.rawRepresentation)
        var broken = catalog
        broken.apps[0].serverAPI?.privateKeyFile = files.path("secret-a")
        let error = #expect(throws: AppleSimulatorError.self) {
            try SimulatedApp.apps(of: broken, defaultAppAppleId: 7)
        }
        #expect(error?.message.contains(files.path("secret-a")) == true)
        #expect(error?.message.contains(files.secretA) == false)
    }
}

/// A notification's signed payload with the fields the app check reads.
struct SeveralAppsNotification: Encodable {
    struct Payload: Encodable {
        var appAppleId: Int64
        var bundleId: String
        var environment = "Production"
        var signedTransactionInfo: String
    }

    var notificationType: String
    var notificationUUID: String
    var signedDate: Int64
    var data: Payload
}

@Suite("Several apps: reconcile")
struct SeveralAppsReconcileTests {
    static func runtime(_ files: SeveralAppsFiles, catalog: [String: Any]) throws -> ReconcileRuntime {
        let ledger = try LedgerTestSupport.freshURL(.sqlite)
        var sources = ConfigurationSources(table: ReconcileConfiguration.table)
        sources.addEnvironment([
            "VERIFY_CATALOG_FILE": try files.writeCatalog(catalog), "VERIFY_LEDGER_URL": ledger,
            "VERIFY_BROKERS": "127.0.0.1:1",
        ])
        return ReconcileRuntime(configuration: try ReconcileConfiguration(sources), logger: Logger(label: "test"))
    }

    @Test("reconcile sweeps each app of the catalog (one lease and checkpoint each); an app without a key is refused")
    func oneSweepPerApp() throws {
        let files = try SeveralAppsFiles()
        defer { files.remove() }
        let runtime = try Self.runtime(files, catalog: files.catalog())
        #expect(
            try runtime.reconcilerNames() == [
                "notification-history/com.example.alpha", "notification-history/com.example.beta",
            ])

        let keyless = files.catalog { _, apps in apps[1]["server_api"] = nil }
        #expect(throws: ConfigurationError.self) { _ = try Self.runtime(files, catalog: keyless).reconcilerNames() }
        do {
            _ = try Self.runtime(files, catalog: keyless).reconcilerNames()
        } catch let error as ConfigurationError {
            #expect(error.key == "catalog_file")
            #expect(error.problem.contains(SeveralAppsFiles.appB))
        }
    }
}
