import AppleSimulator
import Crypto
import Foundation
import Receipts
import Testing
import Traffic

@Suite("Apple simulator: verifyReceipt", .timeLimit(.minutes(2)))
struct AppleSimulatorVerifyReceiptTests {
    @Test(
        "every receipt format verifies in its environment and is redirected from the other",
        arguments: ["app_receipt", "transaction_receipt"], ["Production", "Sandbox"])
    func mintAndVerify(format: String, environment: String) async throws {
        try await AppleSimHarness.with { sim in
            let minted = try await sim.mint(format: format, environment: environment)
            let receipt = try #require(minted["receipt"] as? String)
            let transactionId = try #require(minted["transaction_id"] as? String)
            let sandbox = environment == "Sandbox"
            #expect(transactionId.hasPrefix(sandbox ? "2" : "1"))

            let answer = try await sim.verify(receipt, sandbox: sandbox)
            #expect(answer["status"] as? Int == 0)
            let body = try #require(answer["receipt"] as? [String: Any])
            if format == "app_receipt" {
                #expect(answer["environment"] as? String == environment)
                #expect(body["bundle_id"] as? String == "com.example.app")
                #expect(body["receipt_type"] as? String == (sandbox ? "ProductionSandbox" : "Production"))
                let inApp = try #require(body["in_app"] as? [[String: Any]])
                #expect(inApp.count == 1)
                #expect(inApp.first?["transaction_id"] as? String == transactionId)
                #expect(inApp.first?["product_id"] as? String == "com.example.app.coins")
            } else {
                #expect(body["transaction_id"] as? String == transactionId)
                #expect(body["bid"] as? String == "com.example.app")
                #expect(body["product_id"] as? String == "com.example.app.coins")
            }

            let crossed = try await sim.verify(receipt, sandbox: !sandbox)
            #expect(crossed["status"] as? Int == (sandbox ? 21007 : 21008))
        }
    }

    @Test("subscriptions list renewals in latest_receipt_info; exclude-old-transactions keeps the latest")
    func subscriptionRenewals() async throws {
        try await AppleSimHarness.with { sim in
            let expires = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            let first = try await sim.mint(
                product: "com.example.app.monthly", format: "app_receipt", environment: "Sandbox",
                extra: ["expires_at": expires])
            let originalId = try #require(first["transaction_id"] as? String)
            let renewal = try await sim.mint(
                product: "com.example.app.monthly", format: "app_receipt", environment: "Sandbox",
                extra: ["expires_at": expires + 3_600_000, "original_transaction_id": originalId])
            #expect(renewal["original_transaction_id"] as? String == originalId)

            let answer = try await sim.verify(try #require(first["receipt"] as? String), sandbox: true)
            #expect(answer["status"] as? Int == 0)
            let latest = try #require(answer["latest_receipt_info"] as? [[String: Any]])
            #expect(
                latest.map { $0["transaction_id"] as? String } == [originalId, renewal["transaction_id"] as? String])
            #expect(latest.last?["expires_date_ms"] as? String == String(expires + 3_600_000))
            let pending = try #require(answer["pending_renewal_info"] as? [[String: Any]])
            #expect(pending.first?["auto_renew_status"] as? String == "1")
            #expect(answer["latest_receipt"] as? String != nil)

            let excluded = try await sim.verify(
                try #require(first["receipt"] as? String), sandbox: true, excludeOld: true)
            #expect((excluded["latest_receipt_info"] as? [[String: Any]])?.count == 1)

            // The refreshed receipt minted with the renewal lists both purchases in in_app.
            let refreshed = try await sim.verify(try #require(renewal["receipt"] as? String), sandbox: true)
            #expect(((refreshed["receipt"] as? [String: Any])?["in_app"] as? [Any])?.count == 2)
        }
    }

    @Test("a wrong shared secret answers 21004, the right one 0")
    func sharedSecret() async throws {
        try await AppleSimHarness.with({ $0.sharedSecret = "s3cret-value" }) { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Production")
            let receipt = try #require(minted["receipt"] as? String)
            #expect(try await sim.verify(receipt, sandbox: false, password: "wrong")["status"] as? Int == 21004)
            #expect(try await sim.verify(receipt, sandbox: false, password: "s3cret-value")["status"] as? Int == 0)
        }
    }

    @Test("an expired iOS 6 subscription answers 21006 with the body")
    func expiredTransactionReceipt() async throws {
        try await AppleSimHarness.with { sim in
            let expired = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
            let minted = try await sim.mint(
                product: "com.example.app.monthly", format: "transaction_receipt", environment: "Sandbox",
                extra: ["expires_at": expired, "purchase_date": expired - 3_600_000])
            let answer = try await sim.verify(try #require(minted["receipt"] as? String), sandbox: true)
            #expect(answer["status"] as? Int == 21006)
            #expect(
                (answer["receipt"] as? [String: Any])?["transaction_id"] as? String == minted["transaction_id"]
                    as? String)
            let latest = try #require(answer["latest_expired_receipt_info"] as? [String: Any])
            #expect(latest["expires_date"] as? String == String(expired))

            let active = try await sim.mint(
                product: "com.example.app.monthly", format: "transaction_receipt", environment: "Sandbox",
                extra: ["expires_at": expired + 3_600_000])
            let activeAnswer = try await sim.verify(try #require(active["receipt"] as? String), sandbox: true)
            #expect(activeAnswer["status"] as? Int == 0)
            #expect(activeAnswer["latest_receipt_info"] as? [String: Any] != nil)
        }
    }

    @Test("real Apple receipts are well-formed but not minted here: 21003")
    func realFixturesAre21003() async throws {
        try await AppleSimHarness.with { sim in
            for fixture in [
                "mbaasy/validator_receipts_unified.txt", "mbaasy/decoder_transaction_sandbox.txt",
                "tpinappreceipt/receipt-production", "apple-swift/xcode/xcode-app-receipt-with-transaction",
            ] {
                let text = String(decoding: try TestEnvironment.fixture(fixture), as: UTF8.self)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                let answer = try await sim.verify(text, sandbox: false)
                #expect(answer["status"] as? Int == 21003, "\(fixture)")
            }
        }
    }

    @Test("an iOS 6 transaction receipt carries no app account token: asking for one is 400, its renewal has none")
    func ios6WithoutAccountToken() async throws {
        try await AppleSimHarness.with { sim in
            let token = "3f2a9c4e-1b7d-4e8f-a0b1-c2d3e4f5a6b7"
            let refused = try await sim.post(
                "sim/mint",
                [
                    "bundle_id": "com.example.app", "product_id": "com.example.app.coins",
                    "format": "transaction_receipt", "environment": "Production", "app_account_token": token,
                ])
            #expect(refused.status == 400)
            #expect(String(decoding: refused.data, as: UTF8.self).contains("app_account_token"))
            // A subscription bought with a token on an app receipt, renewed as an iOS 6 receipt: no token there.
            let first = try await sim.mint(
                product: "com.example.app.monthly", format: "app_receipt", environment: "Production",
                extra: ["expires_at": 4_102_444_800_000, "app_account_token": token])
            let original = try #require(first["original_transaction_id"] as? String)
            let renewal = try await sim.mint(
                product: "com.example.app.monthly", format: "transaction_receipt", environment: "Production",
                extra: ["expires_at": 4_105_123_200_000, "original_transaction_id": original])
            let answer = try await sim.verify(try #require(renewal["receipt"] as? String), sandbox: false)
            #expect(answer["status"] as? Int == 0)
            #expect(!String(describing: answer).contains(token), "\(answer)")
        }
    }

    @Test("garbage answers 21002, unreadable JSON 21000")
    func garbage() async throws {
        try await AppleSimHarness.with { sim in
            #expect(try await sim.verify("bm90IGEgcmVjZWlwdA==", sandbox: false)["status"] as? Int == 21002)
            #expect(try await sim.verify("%%%", sandbox: false)["status"] as? Int == 21002)
            #expect(try await sim.verify("", sandbox: true)["status"] as? Int == 21002)
            let jwsMint = try await sim.mint(format: "signed_transaction", environment: "Production")
            #expect(
                try await sim.verify(try #require(jwsMint["receipt"] as? String), sandbox: false)["status"] as? Int
                    == 21002)
            let broken = try await sim.request("POST", "verifyReceipt", body: Data("{not json".utf8))
            #expect(broken.json["status"] as? Int == 21000)
        }
    }

    @Test("truncated and bit-flipped receipts answer 21002 or 21003, never crash")
    func damagedReceipts() async throws {
        try await AppleSimHarness.with { sim in
            for format in ["app_receipt", "transaction_receipt"] {
                let minted = try await sim.mint(format: format, environment: "Production")
                let base64 = try #require(minted["receipt"] as? String)
                let bytes = [UInt8](try #require(Data(base64Encoded: base64)))
                var damaged: [[UInt8]] = stride(from: 1, to: bytes.count, by: max(1, bytes.count / 25)).map {
                    Array(bytes.prefix($0))
                }
                for index in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 25)) {
                    var flipped = bytes
                    flipped[index] ^= 0x40
                    damaged.append(flipped)
                }
                for receipt in damaged {
                    let status = try await sim.verify(Data(receipt).base64EncodedString(), sandbox: false)["status"]
                    #expect([21002, 21003].contains(status as? Int), "\(format): \(String(describing: status))")
                }
            }
        }
    }

    @Test("a refund shows as cancellation_date in verifyReceipt")
    func refund() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Production")
            let receipt = try #require(minted["receipt"] as? String)
            _ = try await sim.verify(receipt, sandbox: false)  // fills the cache
            let refund = try await sim.post("sim/refund", ["transaction_id": try #require(minted["transaction_id"])])
            #expect(refund.status == 200)
            let answer = try await sim.verify(receipt, sandbox: false)
            let inApp = try #require((answer["receipt"] as? [String: Any])?["in_app"] as? [[String: Any]])
            #expect(inApp.first?["cancellation_date_ms"] as? String != nil)
            #expect(try await sim.post("sim/refund", ["transaction_id": "999"]).status == 404)
        }
    }
}

@Suite("Apple simulator: faults, stats, state", .timeLimit(.minutes(2)))
struct AppleSimulatorControlTests {
    @Test("fault ratios of 1 give 21005, 503 and 429 with Retry-After every time")
    func faults() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Production")
            let receipt = try #require(minted["receipt"] as? String)

            #expect(try await sim.post("sim/faults", ["status_21005_ratio": 1.0]).status == 200)
            for _ in 0..<3 { #expect(try await sim.verify(receipt, sandbox: false)["status"] as? Int == 21005) }

            _ = try await sim.post("sim/faults", ["http_503_ratio": 1])
            let unavailable = try await sim.post("verifyReceipt", ["receipt-data": receipt])
            #expect(unavailable.status == 503)

            _ = try await sim.post("sim/faults", ["http_429_ratio": 1, "retry_after_ms": 2000])
            let limited = try await sim.post("verifyReceipt", ["receipt-data": receipt])
            #expect(limited.status == 429)
            let retryAfter = try #require(
                limited.headers.first { ($0.key as? String)?.lowercased() == "retry-after" }?.value as? String)
            let retryAt = try #require(Int64(retryAfter))
            #expect(retryAt > Int64(Date().timeIntervalSince1970 * 1000))

            let current = try await sim.request("GET", "sim/faults")
            #expect(current.json["http_429_ratio"] as? Double == 1)

            _ = try await sim.post("sim/faults", [:])
            #expect(try await sim.verify(receipt, sandbox: false)["status"] as? Int == 0)
        }
    }

    @Test("the injected random source decides partial ratios")
    func partialRatios() async throws {
        try await AppleSimHarness.with({ $0.random = AppleSimFixedRandom(0.3) }) { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Production")
            let receipt = try #require(minted["receipt"] as? String)
            _ = try await sim.post("sim/faults", ["status_21005_ratio": 0.5])
            #expect(try await sim.verify(receipt, sandbox: false)["status"] as? Int == 21005)
            _ = try await sim.post("sim/faults", ["status_21005_ratio": 0.2])
            #expect(try await sim.verify(receipt, sandbox: false)["status"] as? Int == 0)
        }
    }

    @Test("a timed fault holds the request and then answers 504")
    func timeoutFault() async throws {
        try await AppleSimHarness.with { sim in
            _ = try await sim.post("sim/faults", ["timeout_ratio": 1, "timeout_hold_ms": 300])
            let started = ContinuousClock.now
            let reply = try await sim.post("verifyReceipt", ["receipt-data": "AAAA"])
            #expect(reply.status == 504)
            #expect(ContinuousClock.now - started >= .milliseconds(300))
        }
    }

    @Test("stats count requests per endpoint, answers per status, and distinct requests")
    func stats() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Sandbox")
            let receipt = try #require(minted["receipt"] as? String)
            _ = try await sim.post("sim/stats/reset", [:])
            _ = try await sim.verify(receipt, sandbox: false)
            _ = try await sim.verify(receipt, sandbox: true)
            _ = try await sim.verify(receipt, sandbox: true)
            var stats = try await sim.request("GET", "sim/stats").json
            let requests = try #require(stats["requests"] as? [String: Int])
            let statuses = try #require(stats["statuses"] as? [String: Int])
            #expect(requests["verifyReceipt"] == 1)
            #expect(requests["sandbox/verifyReceipt"] == 2)
            #expect(statuses["21007"] == 1)
            #expect(statuses["0"] == 2)
            // One receipt asked three times, at both endpoints: one distinct request.
            #expect(stats["distinct"] as? Int == 1)
            #expect(sim.simulator.stats.snapshot().requests["sim/mint"] == nil)

            _ = try await sim.verify("AAAA", sandbox: false)
            let transactionID = try #require(minted["transaction_id"] as? String)
            _ = try? await sim.request("GET", "sandbox/inApps/v1/transactions/\(transactionID)")
            _ = try? await sim.request("GET", "sandbox/inApps/v1/transactions/\(transactionID)")
            stats = try await sim.request("GET", "sim/stats").json
            #expect(stats["distinct"] as? Int == 3)
            _ = try await sim.post("sim/stats/reset", [:])
            #expect(sim.simulator.stats.snapshot().distinct == 0)
        }
    }

    @Test("a restarted simulator with the same state directory accepts earlier mints")
    func restartKeepsState() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apple-sim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (receipt, transactionId) = try await AppleSimHarness.with({ $0.stateDirectory = directory }) { sim in
            let minted = try await sim.mint(format: "app_receipt", environment: "Production")
            return (try #require(minted["receipt"] as? String), try #require(minted["transaction_id"] as? String))
        }
        try await AppleSimHarness.with({ $0.stateDirectory = directory }) { sim in
            #expect(try await sim.verify(receipt, sandbox: false)["status"] as? Int == 0)
            #expect(sim.simulator.transaction(transactionId) != nil)
            let again = try await sim.mint(format: "app_receipt", environment: "Production")
            #expect(again["transaction_id"] as? String != transactionId)
        }
        // Without the directory a fresh PKI does not know the receipt.
        try await AppleSimHarness.with({ $0.pki = nil }) { sim in
            let status = try await sim.verify(receipt, sandbox: false)["status"] as? Int
            #expect(status == 21003)
        }
    }

    @Test("every PEM file of the state directory ends with a newline, so two concatenated make a valid bundle")
    func statePEMFilesEndWithNewline() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apple-sim-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let pki = try SimulatorPKI.loadOrGenerate(directory: directory)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".pem") }
        #expect(names.count == 8, "\(names)")
        for name in names {
            let bytes = try Data(contentsOf: directory.appendingPathComponent(name))
            #expect(bytes.last == UInt8(ascii: "\n"), "\(name) does not end with a newline")
        }
        // What `cat pki-rsa-root.pem pki-ec-root.pem > bundle.pem` makes: both certificates, readable.
        let bundle = directory.appendingPathComponent("bundle.pem")
        try
            (try Data(contentsOf: directory.appendingPathComponent("pki-rsa-root.pem"))
            + Data(contentsOf: directory.appendingPathComponent("pki-ec-root.pem"))).write(to: bundle)
        let certificates = try TrustStore.loadCertificates(contentsOf: bundle)
        #expect(certificates.count == 2)
        // And the files still load as the same PKI.
        let reloaded = try SimulatorPKI.loadOrGenerate(directory: directory)
        #expect(reloaded.jwsRootDER == pki.jwsRootDER)
    }

    @Test("the trust anchors are served as PEM")
    func roots() async throws {
        try await AppleSimHarness.with { sim in
            let reply = try await sim.request("GET", "sim/roots")
            let text = String(decoding: reply.data, as: UTF8.self)
            #expect(text.components(separatedBy: "-----BEGIN CERTIFICATE-----").count == 3)
        }
    }
}

@Suite("Apple simulator: App Store Server API", .timeLimit(.minutes(2)))
struct AppleSimulatorServerAPITests {
    @Test("transaction info, history and subscription statuses for a minted subscription")
    func endpoints() async throws {
        let key = P256.Signing.PrivateKey()
        try await AppleSimHarness.with({ try? $0.setAPIPublicKey(pem: key.publicKey.pemRepresentation) }) { sim in
            let auth = ["Authorization": try AppleSimHarness.bearerToken(key: key)]
            let expires = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            let first = try await sim.mint(
                product: "com.example.app.monthly", format: "signed_transaction", environment: "Production",
                extra: ["expires_at": expires])
            let id = try #require(first["transaction_id"] as? String)
            for _ in 0..<21 {
                _ = try await sim.mint(
                    product: "com.example.app.monthly", format: "signed_transaction", environment: "Production",
                    extra: ["expires_at": expires, "original_transaction_id": id])
            }

            let info = try await sim.request("GET", "inApps/v1/transactions/\(id)", headers: auth)
            #expect(info.status == 200)
            let jws = try #require(info.json["signedTransactionInfo"] as? String)
            #expect(jws.split(separator: ".").count == 3)

            let page1 = try await sim.request("GET", "inApps/v2/history/\(id)", headers: auth).json
            #expect((page1["signedTransactions"] as? [String])?.count == 20)
            #expect(page1["hasMore"] as? Bool == true)
            let revision = try #require(page1["revision"] as? String)
            let page2 = try await sim.request("GET", "inApps/v2/history/\(id)?revision=\(revision)", headers: auth).json
            #expect((page2["signedTransactions"] as? [String])?.count == 2)
            #expect(page2["hasMore"] as? Bool == false)

            let statuses = try await sim.request("GET", "inApps/v1/subscriptions/\(id)", headers: auth).json
            let data = try #require(statuses["data"] as? [[String: Any]])
            let last = try #require((data.first?["lastTransactions"] as? [[String: Any]])?.first)
            #expect(last["status"] as? Int == 1)
            #expect(last["signedRenewalInfo"] as? String != nil)

            _ = try await sim.post("sim/refund", ["transaction_id": id])
            let refunded = try await sim.request("GET", "inApps/v1/transactions/\(id)", headers: auth)
            let payload = try Self.payload(try #require(refunded.json["signedTransactionInfo"] as? String))
            #expect(payload["revocationDate"] as? Int64 != nil)
        }
    }

    @Test(
        "history follows the truth: billing retry never moves the expiry, a renewal is a new signed transaction after the revision"
    )
    func historyFollowsLifecycle() async throws {
        let key = P256.Signing.PrivateKey()
        try await AppleSimHarness.with({ try? $0.setAPIPublicKey(pem: key.publicKey.pemRepresentation) }) { sim in
            let auth = ["Authorization": try AppleSimHarness.bearerToken(key: key)]
            let expires = Int64(Date().timeIntervalSince1970 * 1000) + 30 * 86_400_000
            let minted = try await sim.mint(
                product: "com.example.app.monthly", format: "signed_transaction", environment: "Production",
                extra: ["expires_at": expires])
            let original = try #require(minted["transaction_id"] as? String)
            let first = try await sim.request("GET", "inApps/v2/history/\(original)", headers: auth).json
            let revision = try #require(first["revision"] as? String)

            _ = try await sim.post("sim/billing-retry", ["original_transaction_id": original])
            let retry = try await sim.request("GET", "inApps/v2/history/\(original)", headers: auth).json
            let lapsed = try Self.payload(try #require((retry["signedTransactions"] as? [String])?.first))
            // The charge fails at the period's end: Apple never moves an expiry back.
            #expect(lapsed["expiresDate"] as? Int == Int(expires))

            let renewed = try await sim.post("sim/renew", ["original_transaction_id": original])
            let renewal = try #require(renewed.json["transaction_id"] as? String)
            // From the revision of the first read: only what came after, the renewal, signed, with its new expiry.
            let after = try await sim.request(
                "GET", "inApps/v2/history/\(original)?revision=\(revision)", headers: auth
            ).json
            let signed = try #require(after["signedTransactions"] as? [String])
            #expect(signed.count == 1)
            let payload = try Self.payload(try #require(signed.first))
            #expect(payload["transactionId"] as? String == renewal)
            #expect(payload["originalTransactionId"] as? String == original)
            #expect(payload["expiresDate"] as? Int == renewed.json["expires_date_ms"] as? Int)
            #expect((payload["expiresDate"] as? Int ?? 0) > Int(Date().timeIntervalSince1970 * 1000))
        }
    }

    @Test("sandbox transactions answer 4040010 in production, unknown ids 4040005, missing tokens 401")
    func errors() async throws {
        try await AppleSimHarness.with { sim in
            let auth = ["Authorization": try AppleSimHarness.bearerToken()]
            let minted = try await sim.mint(format: "signed_transaction", environment: "Sandbox")
            let id = try #require(minted["transaction_id"] as? String)
            let production = try await sim.request("GET", "inApps/v1/transactions/\(id)", headers: auth)
            #expect(production.status == 404)
            #expect(production.json["errorCode"] as? Int == 4_040_010)
            let sandbox = try await sim.request("GET", "sandbox/inApps/v1/transactions/\(id)", headers: auth)
            #expect(sandbox.status == 200)
            let unknown = try await sim.request("GET", "sandbox/inApps/v2/history/1", headers: auth)
            #expect(unknown.json["errorCode"] as? Int == 4_040_005)
            #expect(try await sim.request("GET", "sandbox/inApps/v1/transactions/\(id)").status == 401)
            let badToken = ["Authorization": "Bearer a.b.c"]
            #expect(
                try await sim.request("GET", "sandbox/inApps/v1/transactions/\(id)", headers: badToken).status == 401)
        }
    }

    @Test("minted JWS carry a three-certificate chain ending at the simulator's root")
    func jwsChain() async throws {
        try await AppleSimHarness.with { sim in
            let minted = try await sim.mint(format: "signed_transaction", environment: "Sandbox")
            let jws = try #require(minted["receipt"] as? String)
            let header = try Self.json(String(jws.split(separator: ".")[0]))
            #expect(header["alg"] as? String == "ES256")
            let x5c = try #require(header["x5c"] as? [String])
            #expect(x5c.count == 3)
            let payload = try Self.payload(jws)
            #expect(payload["transactionId"] as? String == minted["transaction_id"] as? String)
            #expect(payload["environment"] as? String == "Sandbox")
            #expect(payload["bundleId"] as? String == "com.example.app")
        }
    }

    static func payload(_ jws: String) throws -> [String: Any] {
        try json(String(jws.split(separator: ".")[1]))
    }

    static func json(_ base64URL: String) throws -> [String: Any] {
        var text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}
