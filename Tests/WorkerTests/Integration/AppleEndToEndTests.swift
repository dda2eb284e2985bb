import AppleClients
import AppleSimulator
import Crypto
import Decision
import Foundation
import Logging
import Messages
import Receipts
import StoreHTTP
import Testing

/// The Apple pieces together: the libcurl clients talk to the simulator, whose receipts and signed payloads the
/// Receipts target verifies against the simulator's roots.
@Suite("Apple clients against the simulator", .timeLimit(.minutes(2)), .serialized)
struct AppleEndToEndTests {
    static func trust(_ simulator: AppleSimulator) throws -> TrustStore {
        let anchors = try [simulator.pki.receiptRootDER, simulator.pki.jwsRootDER].map {
            try TrustStore(derEncodedAnchors: [$0]).anchors
        }.flatMap { $0 }
        return TrustStore.apple.adding(anchors: anchors)
    }

    @Test("a sandbox receipt sent to production is verified by sandbox in one call")
    func sandboxHop() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try sim.simulator.mint(
                MintRequest(
                    bundleId: "com.example.verifyworker", productId: "com.example.verifyworker.gems100",
                    format: .appReceipt, environment: .sandbox))
            let engine = try CurlHTTPEngine()
            defer { engine.shutdown() }
            let client = VerifyReceiptClient(
                transport: engine, configuration: .endpoints(base: sim.base.absoluteString),
                logger: Logger(label: "test"))
            let outcome = try await client.verify(receiptData: minted.receipt)
            let answer = try #require(outcome.answer, "\(outcome)")
            #expect(answer.status == .valid)
            #expect(answer.environment == .sandbox)
            #expect(answer.answeredBy == .sandbox)
            let ids = (answer.receipt?.inApp ?? []).map(\.transactionID)
            #expect(ids == [minted.transaction.transactionId])

            // The same receipt passes local verification against the simulator's root, and not against Apple's alone.
            let catalog = Catalog(
                bundleIDs: ["com.example.verifyworker"],
                products: [.init(id: "com.example.verifyworker.gems100", type: .consumable)])
            let isWorthVerifying = ProofPolicy(catalog: catalog).isWorthVerifying(bundleID:)
            let local = ReceiptAnalyzer(trust: try Self.trust(sim.simulator), isWorthVerifying: isWorthVerifying)
                .analyze(Array(minted.receipt.utf8))
            #expect(local.signature == .valid, "\(local.signature)")
            let appleOnly = ReceiptAnalyzer(trust: .apple, isWorthVerifying: isWorthVerifying)
                .analyze(Array(minted.receipt.utf8))
            #expect(appleOnly.signature != .valid)
        }
    }

    @Test("Server API answers are used only after the Receipts verifier accepts their JWS")
    func serverAPIVerifiedPayloads() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try sim.simulator.mint(
                MintRequest(
                    bundleId: "com.example.verifyworker", productId: "com.example.verifyworker.premium",
                    format: .signedTransaction, environment: .production))
            let engine = try CurlHTTPEngine()
            defer { engine.shutdown() }
            let key = AppStoreConnectKey(
                keyID: "KEY123", issuerID: "issuer", bundleID: "com.example.verifyworker",
                privateKey: P256.Signing.PrivateKey())
            let configuration = AppStoreServerAPIConfiguration(
                productionBaseURL: sim.base.absoluteString, sandboxBaseURL: sim.base.absoluteString + "/sandbox")
            func client(_ trust: TrustStore) -> AppStoreServerAPIClient {
                AppStoreServerAPIClient(
                    transport: engine, configuration: configuration, signer: AppStoreTokenSigner(key: key),
                    verifier: ReceiptsPayloadVerifier(
                        analyzer: ReceiptAnalyzer(trust: trust), bundleID: "com.example.verifyworker"),
                    logger: Logger(label: "test"))
            }
            let trusted = try await client(try Self.trust(sim.simulator))
                .transactionInfo(transactionID: minted.transaction.transactionId)
            let answer = try #require(trusted.answer, "\(trusted)")
            #expect(answer.transaction.transactionID == minted.transaction.transactionId)
            #expect(answer.transaction.productID == "com.example.verifyworker.premium")

            // With Apple's roots only, the simulator's signature is not trusted and nothing is used.
            let untrusted = try await client(.apple).transactionInfo(transactionID: minted.transaction.transactionId)
            #expect(untrusted.answer == nil)
            #expect(!untrusted.isRetryable)
        }
    }
}
