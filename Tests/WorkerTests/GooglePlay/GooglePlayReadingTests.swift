import Crypto
import Decision
import Foundation
import GooglePlay
import Messages
import Testing
import _CryptoExtras

/// A Google Play purchase read locally (``PlayPurchaseReader``) and judged by Decision, with the shared fixtures
/// (google-play/, MANIFEST.txt section G): the store adapter reports facts, the decision rejects junk without a call
/// (`prefilter` or `signature`), and a purchase that passes is never granted locally: only Google decides it.
@Suite("Google Play: local reading of a purchase")
struct GooglePlayReadingTests {
    static let appA = "com.mokelab.dummyApp"
    static let productA = "dummy_app_item"
    static let appB = "com.mokelab.demoapp"
    static let productB = "demo_product_id"

    static func fixturePath(_ name: String) -> String {
        TestEnvironment.fixturesDirectory.appendingPathComponent("google-play/\(name)").path
    }

    static func fixtureText(_ name: String) throws -> String {
        String(decoding: try TestEnvironment.fixture("google-play/\(name)"), as: UTF8.self)
    }

    /// Both fixture apps with purchase-a's licensing key (purchase-b was signed by another key).
    static let catalog = Catalog(
        playApps: [
            .init(
                packageName: appA, licensingKeyFile: fixturePath("licensing-key.base64"),
                serviceAccountKeyFile: "/run/secrets/a.json"),
            .init(
                packageName: appB, licensingKeyFile: fixturePath("licensing-key.pem"),
                serviceAccountKeyFile: "/run/secrets/b.json"),
        ],
        playProducts: [.init(id: productA, type: .nonConsumable), .init(id: productB, type: .consumable)])

    static func reader() throws -> PlayPurchaseReader {
        PlayPurchaseReader(licensingKeys: try PlayLicensingKeys.load(catalog))
    }

    /// purchase-a as a client sends it: its exact JSON and signature.
    static func purchaseA() throws -> GooglePlayPurchase {
        let data = try fixtureText("purchase-a.json")
        let token = try #require(SignedToken.token(in: data))
        return GooglePlayPurchase(
            packageName: appA, productID: productA, purchaseToken: token, purchaseData: data,
            signature: try fixtureText("purchase-a.signature"))
    }

    /// What Decision makes of `purchase`: the verdict of a stateless rejection, or nil when Google must be asked.
    static func verdict(_ purchase: GooglePlayPurchase, reader: PlayPurchaseReader) -> Verdict? {
        let job = ReceiptJob(jobID: "play-job", accountID: "acct-1", proof: .googlePlay(purchase))
        let facts = reader.facts(of: purchase)
        let evidence = EvidenceMapping.evidence(from: facts, policy: ProofPolicy(catalog: catalog))
        let policy = LedgerSettlement.policy(catalog: catalog, allowSandbox: false, now: Date(timeIntervalSince1970: 1))
        switch LedgerSettlement.decide(job: job, evidence: evidence, policy: policy) {
        case .needsApple:
            return nil
        case .decided(let decision):
            #expect(decision.writes.isEmpty, "a local rejection writes nothing")
            #expect(decision.verdict.store == .googlePlay)
            return decision.verdict
        }
    }

    @Test("purchase-a, its exact bytes signed by its app's key: valid, and only Google can decide it")
    func validPurchase() throws {
        let reader = try Self.reader()
        let purchase = try Self.purchaseA()
        let facts = reader.facts(of: purchase)
        #expect(facts.signature == .valid)
        #expect(facts.kind == .storeHeld)
        #expect(facts.store == .googlePlay)
        #expect(facts.mismatches.isEmpty)
        #expect(ProofPolicy(catalog: Self.catalog).judge(facts).code == "needs_apple")
        #expect(Self.verdict(purchase, reader: reader) == nil, "never granted, never rejected locally")
        // Without the signed data the token alone is read: the same, Google decides.
        var bare = purchase
        bare.purchaseData = nil
        bare.signature = nil
        #expect(reader.facts(of: bare).signature == .notChecked(reason: "no signed purchase data"))
        #expect(Self.verdict(bare, reader: reader) == nil)
    }

    @Test("an altered or foreign signed purchase is not_authenticated, decided by the signature")
    func badSignatures() throws {
        let reader = try Self.reader()
        let purchaseA = try Self.purchaseA()
        var broken = purchaseA
        broken.purchaseToken += "_BROKEN_INPUT"
        broken.purchaseData = purchaseA.purchaseData?.replacingOccurrences(
            of: purchaseA.purchaseToken, with: broken.purchaseToken)
        var withoutNewline = purchaseA
        withoutNewline.purchaseData = String(try #require(purchaseA.purchaseData).dropLast())
        // purchase-b is signed by the same key as purchase-a (openssl verifies both with licensing-key.pem): its
        // own signature is valid, purchase-a's is not, nor one by another app's key.
        let dataB = try Self.fixtureText("purchase-b.json")
        let purchaseB = GooglePlayPurchase(
            packageName: Self.appB, productID: Self.productB, purchaseToken: try #require(SignedToken.token(in: dataB)),
            purchaseData: dataB, signature: try Self.fixtureText("purchase-b.signature"))
        #expect(reader.facts(of: purchaseB).signature == .valid)
        var signatureOfA = purchaseB
        signatureOfA.signature = purchaseA.signature
        let otherKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        var foreignKey = purchaseB
        foreignKey.signature = try otherKey.signature(
            for: Insecure.SHA1.hash(data: Array(dataB.utf8)), padding: .insecurePKCS1v1_5
        ).rawRepresentation.base64EncodedString()
        // The same signature verifies with the key that made it (a 2048-bit key, as Google's consoles issue now).
        let otherPublic = try #require(
            PlayLicensingKey(text: otherKey.publicKey.derRepresentation.base64EncodedString()))
        #expect(otherPublic.keySizeInBits == 2048)
        #expect(otherPublic.isValidSignature(try #require(foreignKey.signature), for: Array(dataB.utf8)))
        var notBase64 = purchaseA
        notBase64.signature = "not base64!"
        for purchase in [broken, withoutNewline, signatureOfA, foreignKey, notBase64] {
            guard case .invalid = reader.facts(of: purchase).signature else {
                Issue.record("the signature verified: \(purchase.purchaseData?.suffix(20) ?? "")")
                continue
            }
            let verdict = try #require(Self.verdict(purchase, reader: reader))
            #expect(verdict.outcome == .rejected)
            #expect(verdict.reason == .notAuthenticated)
            #expect(verdict.decidedBy == .signature)
        }
    }

    @Test("signed data of another app, product or token than the job names is rejected locally")
    func mismatches() throws {
        let reader = try Self.reader()
        let purchaseA = try Self.purchaseA()
        // appB is listed with purchase-a's key, so its signature verifies: only what it names differs.
        var otherApp = purchaseA
        otherApp.packageName = Self.appB
        #expect(reader.facts(of: otherApp).mismatches == [.app(Self.appA)])
        var otherProduct = purchaseA
        otherProduct.productID = Self.productB
        #expect(reader.facts(of: otherProduct).mismatches == [.product(Self.productA)])
        var otherToken = purchaseA
        otherToken.purchaseToken = "another.token-1"
        #expect(reader.facts(of: otherToken).mismatches == [.purchaseToken])
        let expected: [(GooglePlayPurchase, Verdict.Reason, Verdict.DecidedBy)] = [
            (otherApp, .wrongBundle, .prefilter), (otherProduct, .productMismatch, .prefilter),
            (otherToken, .notAuthenticated, .signature),
        ]
        for (purchase, reason, decidedBy) in expected {
            let verdict = try #require(Self.verdict(purchase, reader: reader))
            #expect(verdict.outcome == .rejected)
            #expect(verdict.reason == reason)
            #expect(verdict.decidedBy == decidedBy)
        }
    }

    @Test("a package or product the catalog does not sell is rejected by the prefilter, its signature unread")
    func catalogChecks() throws {
        let reader = try Self.reader()
        var otherApp = try Self.purchaseA()
        otherApp.packageName = "com.example.cracked"
        #expect(reader.facts(of: otherApp).signature == .notChecked(reason: "no licensing key for the package"))
        var unknownProduct = try Self.purchaseA()
        unknownProduct.productID = "gems_999"
        for (purchase, reason) in [(otherApp, Verdict.Reason.wrongBundle), (unknownProduct, .unknownProduct)] {
            let verdict = try #require(Self.verdict(purchase, reader: reader))
            #expect(verdict.reason == reason)
            #expect(verdict.decidedBy == .prefilter)
        }
    }

    @Test(
        "a token of 1 to 4096 bytes of A-Z a-z 0-9 . _ - is read; any other is malformed without a call",
        arguments: [
            (0, "", false), (1, "a", true), (4096, "", true), (4097, "", false), (5, "tøken", false),
            (6, "to ken", false), (5, "to/en", false), (5, "AZaz09._-", true),
        ])
    func tokenShape(length: Int, text: String, accepted: Bool) throws {
        let token = text.isEmpty ? String(repeating: "Ab0._-", count: 700).prefix(length).description : text
        #expect(token.utf8.count == length || !text.isEmpty)
        let purchase = GooglePlayPurchase(packageName: Self.appA, productID: Self.productA, purchaseToken: token)
        let reader = try Self.reader()
        let facts = reader.facts(of: purchase)
        if accepted {
            #expect(facts.kind == .storeHeld)
            #expect(Self.verdict(purchase, reader: reader) == nil)
        } else {
            guard case .unreadable(let reason) = facts.kind else {
                Issue.record("a token of \(token.utf8.count) bytes was accepted")
                return
            }
            #expect(!reason.contains(token) || token.isEmpty, "the reason never quotes the token")
            let verdict = try #require(Self.verdict(purchase, reader: reader))
            #expect(verdict.reason == .malformed)
            #expect(verdict.decidedBy == .prefilter)
        }
    }

    @Test("the licensing key is read from the catalog's file at start; a file that is not a key is one clear line")
    func licensingKeyFiles() throws {
        let keys = try PlayLicensingKeys.load(Self.catalog)
        #expect(keys[Self.appA]?.keySizeInBits == 1024)
        #expect(keys[Self.appB]?.keySizeInBits == 1024, "the PEM form reads as the same key")
        let catalog = Catalog(
            playApps: [
                .init(packageName: Self.appA, licensingKeyFile: "/run/secrets/key", serviceAccountKeyFile: "/s.json")
            ])
        let notKeys: [Data] = [
            Data("a licensing key goes here".utf8), Data(), try TestEnvironment.fixture("google-play/purchase-a.json"),
            Data("MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDcgE5K4uCU".utf8),
        ]
        for content in notKeys {
            let expected = PlayConfigurationError(
                "play_apps[0] (com.mokelab.dummyApp).licensing_key_file: /run/secrets/key is not a licensing key (the "
                    + "Play Console's base64 SubjectPublicKeyInfo of an RSA key of at least 1024 bits)")
            #expect(throws: expected) { try PlayLicensingKeys.load(catalog, readFile: { _ in content }) }
            #expect(!expected.description.contains("\n"))
        }
        struct Missing: Error {}
        #expect(
            throws: PlayConfigurationError(
                "play_apps[0] (com.mokelab.dummyApp).licensing_key_file: cannot read /run/secrets/key")
        ) { try PlayLicensingKeys.load(catalog, readFile: { _ in throw Missing() }) }
    }
}

/// The `purchaseToken` a fixture's purchase JSON names.
enum SignedToken {
    static func token(in json: String) -> String? {
        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        return object?["purchaseToken"] as? String
    }
}
