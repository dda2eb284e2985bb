import AppleClients
import AppleSimulator
import Chaos
import Crypto
import Decision
import Foundation
import Ledger
import Logging
import Messages
import Operations
import Receipts
import ServiceLifecycle
import StoreHTTP
import Testing
import Traffic
import Worker

/// Secrets, keys and receipts never reach a log line; TLS verification cannot be turned off; a
/// job cannot choose the host the worker calls; replays are rejected.
@Suite("Security: nothing secret in the logs", .timeLimit(.minutes(2)))
struct SecurityLogTests {
    @Test("Apple clients and the simulator at trace level: no shared secret, key, token or receipt in any line")
    func appleClientsAndSimulator() async throws {
        let capture = SecurityLogCapture()
        let secret = "chaos-secret-\(UUID().uuidString)"
        let wrongSecret = "wrong-secret-\(UUID().uuidString)"
        var configuration = AppleSimulatorConfiguration()
        configuration.sharedSecret = secret
        configuration.logger = capture.logger("apple-sim")
        configuration.pki = try AppleSimHarness.sharedPKI.get()
        let simulator = try AppleSimulator(configuration: configuration)
        let server = Task { try await simulator.run() }
        defer { server.cancel() }
        let port = try await simulator.waitUntilReady()
        let base = "http://127.0.0.1:\(port)"

        var receipts: [String] = []
        var transactionIDs: [String] = []
        for format in SimulatedReceiptFormat.allCases {
            for environment in [AppleEnvironment.production, .sandbox] {
                var request = MintRequest(
                    bundleId: ChaosApp.bundleID, productId: ChaosApp.subscription, format: format,
                    environment: environment)
                request.expiresDateMs = Int64(Date().timeIntervalSince1970 * 1000) + 86_400_000
                let minted = try simulator.mint(request)
                receipts.append(minted.receipt)
                transactionIDs.append(minted.transaction.transactionId)
            }
        }

        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let client = VerifyReceiptClient(
            transport: engine,
            configuration: .endpoints(base: base, sharedSecret: AppleSharedSecret(secret)),
            logger: capture.logger("verify-receipt"))
        let wrong = VerifyReceiptClient(
            transport: engine,
            configuration: .endpoints(base: base, sharedSecret: AppleSharedSecret(wrongSecret)),
            logger: capture.logger("verify-receipt-wrong"))
        for receipt in receipts {
            _ = try await client.verify(receiptData: receipt)
            _ = try await wrong.verify(receiptData: receipt)
        }
        // Failures log too: 503s and 21005 storms.
        var storm = FaultPlan()
        storm.http503Ratio = 0.5
        storm.status21005Ratio = 1
        simulator.setFaults(storm)
        for receipt in receipts.prefix(2) { _ = try await client.verify(receiptData: receipt) }
        simulator.setFaults(FaultPlan())

        let key = P256.Signing.PrivateKey()
        let connectKey = try AppStoreConnectKey(
            keyID: "KEYID12345", issuerID: UUID().uuidString, bundleID: ChaosApp.bundleID,
            privateKeyPEM: key.pemRepresentation)
        let signer = AppStoreTokenSigner(key: connectKey)
        let verifier = ReceiptsPayloadVerifier(
            analyzer: ReceiptAnalyzer(
                trust: TrustStore.apple.adding(anchors: [simulator.pki.rsaRoot, simulator.pki.ecRoot])),
            bundleID: ChaosApp.bundleID)
        let api = AppStoreServerAPIClient(
            transport: engine,
            configuration: AppStoreServerAPIConfiguration(productionBaseURL: base, sandboxBaseURL: base + "/sandbox"),
            signer: signer, verifier: verifier, logger: capture.logger("server-api"))
        for id in transactionIDs + ["1999999999999999"] {
            _ = try await api.transactionInfo(transactionID: id)
            _ = try await api.subscriptionStatuses(transactionID: id)
        }
        let token = try signer.token()

        #expect(capture.lines.count > 0)
        var needles: [(name: String, value: String)] = [
            ("shared secret", secret), ("wrong shared secret", wrongSecret), ("bearer token", token),
            ("token signature", String(token.split(separator: ".").last ?? "")),
        ]
        for line in key.pemRepresentation.split(separator: "\n") where !line.hasPrefix("-----") {
            needles.append(("private key PEM line", String(line)))
        }
        for (index, receipt) in receipts.enumerated() {
            needles.append(("receipt \(index)", receipt))
            // A receipt's head alone is already too much: the first 64 characters after the common header.
            if receipt.count > 160 {
                let start = receipt.index(receipt.startIndex, offsetBy: 96)
                needles.append(("receipt \(index) fragment", String(receipt[start...].prefix(64))))
            }
        }
        let leaks = capture.leaks(of: needles)
        #expect(leaks.isEmpty, "\(leaks.prefix(5))")
    }

    /// A service group names its services in its debug lines; by default with `"\(service)"`, which reflects the whole
    /// value, configuration included (and costs a worker milliseconds at start).
    struct ServiceHoldingASecret: Service {
        let ledgerURL = "postgres://verify:pw-never-logged@127.0.0.1/ledger"
        func run() async throws { try? await gracefulShutdown() }
    }

    @Test("A service group's debug lines name each service by its type, never by its contents")
    func serviceNames() async throws {
        let capture = SecurityLogCapture()
        try await HarnessServices.run([ServiceHoldingASecret()], logger: capture.logger("harness")) {}
        #expect(capture.lines.contains { $0.contains("ServiceHoldingASecret") })
        #expect(capture.leaks(of: [("ledger password", "pw-never-logged")]).isEmpty)
        // Every group in the product and the harness names its services itself; the long-running commands build
        // theirs through `ServiceGroup.command`, which does.
        let root = TestEnvironment.packageRoot.appendingPathComponent("Sources")
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        var unnamed: [String] = []
        var groups = 0
        while let url = enumerator?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            guard text.contains("ServiceGroup(") || text.contains("ServiceGroup.command(") else { continue }
            groups += 1
            if text.contains("ServiceGroup("), !text.contains("serviceName:") { unnamed.append(url.lastPathComponent) }
        }
        #expect(groups >= 7)
        #expect(unnamed.isEmpty, "\(unnamed)")
    }

    @Test("Secret holders print redacted")
    func redactedDescriptions() throws {
        let secret = AppleSharedSecret("top-secret-value")
        #expect(!"\(secret)".contains("top-secret-value"))
        #expect(!String(reflecting: secret).contains("top-secret-value"))
        let key = P256.Signing.PrivateKey()
        let connectKey = try AppStoreConnectKey(
            keyID: "K", issuerID: "I", bundleID: "B", privateKeyPEM: key.pemRepresentation)
        let body = key.pemRepresentation.split(separator: "\n").dropFirst().first.map(String.init) ?? "x"
        #expect(!"\(connectKey)".contains(body))
        #expect(!String(reflecting: connectKey).contains(body))
        var dumped = ""
        dump(connectKey, to: &dumped)
        #expect(!dumped.contains(body))
    }
}

@Suite("Security: TLS verification cannot be turned off", .timeLimit(.minutes(2)))
struct SecurityTLSTests {
    /// Words an option that weakens TLS would carry.
    static let forbidden = [
        "insecure", "skip_tls", "skiptls", "ssl_verify", "sslverify", "tls_verify", "tlsverify", "verify_peer",
        "verifypeer", "verify_host", "verifyhost", "self_signed", "selfsigned", "no_verify", "noverify",
        "allow_invalid", "allowinvalid", "allow_untrusted", "allowuntrusted", "disable_tls", "disabletls",
    ]

    static func weakening(_ names: [String]) -> [String] {
        names.filter { name in
            let lowered = name.lowercased()
            return forbidden.contains {
                lowered.contains($0) || lowered.contains($0.replacingOccurrences(of: "_", with: ""))
            }
        }
    }

    @Test("No setting of the engine, the clients or the worker names TLS verification")
    func noSuchSetting() {
        let engine = Mirror(reflecting: HTTPEngineConfiguration()).children.compactMap(\.label)
        let verifyReceipt = Mirror(reflecting: VerifyReceiptConfiguration()).children.compactMap(\.label)
        let serverAPI = Mirror(reflecting: AppStoreServerAPIConfiguration()).children.compactMap(\.label)
        #expect(engine.contains("caBundlePath"), "the mirror sees the engine's settings")
        #expect(Self.weakening(engine + verifyReceipt + serverAPI).isEmpty)
        let keys = WorkerConfiguration.keys.map(\.name)
        #expect(keys.contains("ca_bundle"))
        #expect(Self.weakening(keys).isEmpty)
    }

    @Test("The curl engine sets peer and host verification on, and nothing in the sources turns them off")
    func sources() throws {
        let sources = TestEnvironment.packageRoot.appendingPathComponent("Sources")
        var offending: [String] = []
        var found = 0
        let enumerator = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            guard ["swift", "c", "h"].contains(url.pathExtension) else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for line in text.split(separator: "\n")
            where line.contains("SSL_VERIFY") || line.contains("PINNEDPUBLICKEY") {
                found += 1
                let compact = line.replacingOccurrences(of: " ", with: "")
                if compact.contains("VERIFYPEER,0") || compact.contains("VERIFYHOST,0")
                    || compact.contains("VERIFYHOST,1") || compact.contains("VERIFYSTATUS,0")
                {
                    offending.append("\(url.lastPathComponent): \(line)")
                }
            }
            if text.contains("CURLSSLOPT_NO_REVOKE") || text.contains("CURLOPT_SSL_VERIFYPEER, 0L") {
                offending.append(url.lastPathComponent)
            }
        }
        #expect(found >= 2, "the engine sets CURLOPT_SSL_VERIFYPEER and CURLOPT_SSL_VERIFYHOST")
        #expect(offending.isEmpty, "\(offending)")
    }

    @Test("verifyReceipt to a self-signed server is refused, and the receipt is never answered")
    func selfSigned() async throws {
        let server = try await AppleClientsTLSServer.start()
        defer { server.stop() }
        let engine = try CurlHTTPEngine()
        defer { engine.shutdown() }
        let client = VerifyReceiptClient(
            transport: engine,
            configuration: VerifyReceiptConfiguration(
                productionURL: "https://127.0.0.1:\(server.port)/verifyReceipt",
                sandboxURL: "https://127.0.0.1:\(server.port)/sandbox/verifyReceipt"),
            logger: Logger(label: "security-tls"))
        let outcome = try await client.verify(receiptData: "TUlJVA==")
        switch outcome {
        case .answered: Issue.record("a server with an untrusted certificate was believed")
        case .retryable(let advice): Issue.record("TLS failure treated as retryable: \(advice)")
        case .failed: break
        }
    }
}

@Suite("Security: a job never chooses the host", .timeLimit(.minutes(2)))
struct SecurityHostTests {
    static let production = "https://buy.example.invalid/verifyReceipt"
    static let sandbox = "https://sandbox.example.invalid/verifyReceipt"

    @Test("Adversarial proofs (URLs, hosts, x5u/jku headers) only ever reach the configured verifyReceipt URLs")
    func verifyReceiptURLs() async throws {
        let spy = SecuritySpyTransport { request in
            // 21007 sends every receipt to sandbox too: both configured URLs are exercised.
            let status = request.url == Self.production ? 21007 : 21002
            return TransportResponse(status: 200, body: Array("{\"status\":\(status)}".utf8))
        }
        let client = VerifyReceiptClient(
            transport: spy,
            configuration: VerifyReceiptConfiguration(productionURL: Self.production, sandboxURL: Self.sandbox),
            logger: Logger(label: "security-hosts"))
        // Generated and classified off the cooperative pool: the corpus holds messages up to ~1 MiB, and building
        // them there starved the other tests' servers and Kafka clients.
        let jobs = try await OffPool.run {
            var corpus = AdversarialJobCorpus(seed: 11, tag: "host", baitURL: "http://127.0.0.1:9/bait")
            return corpus.generate(count: 600).compactMap { message -> ReceiptJob? in
                guard case .job(let job) = AdversarialJobCorpus.classify(message.value) else { return nil }
                return job
            }
        }
        var asked = 0
        for job in jobs {
            _ = try await client.verify(receiptData: job.proof.value)
            asked += 1
        }
        #expect(asked > 50)
        let hosts = Set(spy.requested)
        #expect(
            hosts.isSubset(of: [Self.production, Self.sandbox]), "\(hosts.subtracting([Self.production, Self.sandbox]))"
        )
    }

    @Test(
        "Hostile transaction ids never reach the network; valid ones only the configured base",
        arguments: [
            "../../sim/faults", "1/../../x", "http://127.0.0.1:9/", "1?x=1", "1#f", "%2e%2e", "1@evil.example",
            "１２３", "1 2", "1\n2", String(repeating: "1", count: 65), "",
        ])
    func serverAPIIDs(id: String) async throws {
        let spy = SecuritySpyTransport { _ in
            TransportResponse(status: 404, body: Array("{\"errorCode\":4040010,\"errorMessage\":\"x\"}".utf8))
        }
        let key = try AppStoreConnectKey(
            keyID: "K", issuerID: "I", bundleID: ChaosApp.bundleID,
            privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation)
        let api = AppStoreServerAPIClient(
            transport: spy,
            configuration: AppStoreServerAPIConfiguration(
                productionBaseURL: "https://api.example.invalid", sandboxBaseURL: "https://sandbox-api.example.invalid"),
            signer: AppStoreTokenSigner(key: key),
            verifier: ReceiptsPayloadVerifier(analyzer: ReceiptAnalyzer(), bundleID: ChaosApp.bundleID),
            logger: Logger(label: "security-hosts"))
        let outcome = try await api.transactionInfo(transactionID: id)
        #expect(spy.requested.isEmpty, "\(spy.requested)")
        if case .answered = outcome { Issue.record("a hostile id was answered") }

        let valid = try await api.transactionInfo(transactionID: "1000000000000001")
        _ = valid
        #expect(
            spy.requested == [
                "https://api.example.invalid/inApps/v1/transactions/1000000000000001",
                "https://sandbox-api.example.invalid/inApps/v1/transactions/1000000000000001",
            ])
    }

    @Test("The job-handling targets have no network code of their own")
    func noNetworkInLocalTargets() throws {
        let root = TestEnvironment.packageRoot.appendingPathComponent("Sources")
        var offending: [String] = []
        for target in ["Messages", "Receipts", "Decision"] {
            // A target that moved would make this check pass on nothing.
            let directory = root.appendingPathComponent(target)
            #expect(FileManager.default.fileExists(atPath: directory.path), "Sources/\(target) is gone")
            let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                guard url.pathExtension == "swift" else { continue }
                let text = try String(contentsOf: url, encoding: .utf8)
                for word in ["URLSession", "FoundationNetworking", "CCurl", "Data(contentsOf: URL(string", "socket("]
                where text.contains(word) {
                    offending.append("\(target)/\(url.lastPathComponent): \(word)")
                }
            }
        }
        #expect(offending.isEmpty, "\(offending)")
    }
}

@Suite("Security: replays are rejected", .timeLimit(.minutes(2)))
struct SecurityReplayTests {
    static let policy = DecisionPolicy(
        allowSandbox: false, now: Date(),
        catalog: Catalog(
            bundleIDs: [ChaosApp.bundleID],
            products: [
                .init(id: ChaosApp.consumable, type: .consumable),
                .init(id: ChaosApp.nonConsumable, type: .nonConsumable),
            ]))

    static func evidence(_ transactionID: String, product: String = ChaosApp.consumable) -> PurchaseEvidence {
        PurchaseEvidence(
            source: .signature, authenticity: .authentic, environment: .production, bundleID: ChaosApp.bundleID,
            transactions: [
                PurchaseTransaction(
                    transactionID: transactionID, productID: product, productType: .consumable,
                    purchaseDate: Date(timeIntervalSinceNow: -60))
            ])
    }

    static func job(_ id: String, _ account: String) -> ReceiptJob {
        ReceiptJob(jobID: id, accountID: account, proof: .signedTransaction("eyJ.x.y"), bundleID: ChaosApp.bundleID)
    }

    static func settle(_ job: ReceiptJob, _ transactionID: String, ledger: some Ledger) async throws -> Verdict? {
        let outcome = try await ledger.settle(job: job, evidence: evidence(transactionID), policy: policy)
        guard case .verdict(let verdict) = outcome else { return nil }
        return verdict
    }

    static func withLedger<T: Sendable>(_ body: @Sendable (any Ledger) async throws -> T) async throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("security-\(UUID().uuidString).sqlite")
        defer { try? FileManager.default.removeItem(at: path) }
        var logger = Logger(label: "security-ledger")
        logger.logLevel = .error
        return try await LedgerFactory.withLedger(url: "sqlite:\(path.path)", logger: logger, body)
    }

    @Test("A transaction replayed by another account, the same job again, the owner again")
    func replays() async throws {
        try await Self.withLedger { ledger in
            let first = try await Self.settle(Self.job("j1", "alice"), "1000000000000101", ledger: ledger)
            #expect(first?.outcome == .granted)
            let again = try await Self.settle(Self.job("j1", "alice"), "1000000000000101", ledger: ledger)
            #expect(again == first)
            let owner = try await Self.settle(Self.job("j2", "alice"), "1000000000000101", ledger: ledger)
            #expect(owner?.outcome == .alreadyGranted)
            let replay = try await Self.settle(Self.job("j3", "mallory"), "1000000000000101", ledger: ledger)
            #expect(replay?.outcome == .rejected)
            #expect(replay?.reason == .replayed)
        }
    }

    @Test("Ten accounts racing for one transaction: exactly one is granted")
    func concurrentReplays() async throws {
        try await Self.withLedger { ledger in
            let verdicts = try await withThrowingTaskGroup(of: Verdict?.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        try await Self.settle(
                            Self.job("race-\(index)", "account-\(index)"), "1000000000000202", ledger: ledger)
                    }
                }
                return try await group.reduce(into: [Verdict?]()) { $0.append($1) }
            }
            #expect(verdicts.filter { $0?.outcome == .granted }.count == 1)
            #expect(verdicts.filter { $0?.reason == .replayed }.count == 9)
        }
    }

    @Test("The seed mix's repeats: by their owner idempotent, by another account rejected")
    func seedRepeats() async throws {
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        configuration.pki = try AppleSimHarness.sharedPKI.get()
        let simulator = try AppleSimulator(configuration: configuration)
        var generator = SeedTrafficGenerator(
            simulator: simulator, bundleID: ChaosApp.bundleID, productIDs: [ChaosApp.consumable],
            mix: TrafficMix(shares: [.genuine: 0.6, .repeated: 0.4]), seed: 5)
        let jobs = try generator.generate(count: 120)
        try await Self.withLedger { ledger in
            var owners: [String: String] = [:]
            var replays = 0
            for item in jobs {
                guard let transaction = item.transactionID else { continue }
                let verdict = try await Self.settle(item.job, transaction, ledger: ledger)
                switch item.category {
                case .genuine:
                    #expect(verdict?.outcome == .granted)
                    owners[transaction] = item.job.accountID
                case .repeated where owners[transaction] == item.job.accountID:
                    #expect(verdict?.outcome == .alreadyGranted)
                case .repeated:
                    #expect(verdict?.outcome == .rejected && verdict?.reason == .replayed)
                    replays += 1
                default:
                    break
                }
            }
            #expect(replays > 5)
        }
    }
}
