import Foundation
import Messages
import Testing

@testable import AppleClients

@Suite("Apple clients: verifyReceipt response parsing")
struct AppleClientsReceiptParsingTests {
    private func parse(_ fixture: String, answeredBy: AppleEnvironment = .production) throws -> VerifyReceiptResponse {
        try VerifyReceiptResponse.parse(Array(try TestEnvironment.fixture(fixture)), answeredBy: answeredBy)
    }

    private func parse(text: String) throws -> VerifyReceiptResponse {
        try VerifyReceiptResponse.parse(Array(text.utf8), answeredBy: .production)
    }

    private func date(ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

    @Test("iOS 7 app receipt with in_app and latest_receipt_info (mbaasy, real sandbox answer)")
    func unifiedReceipt() throws {
        let response = try parse("mbaasy/validator_remote_unified.json")
        #expect(response.status == .valid)
        #expect(response.environment == .sandbox)
        let receipt = try #require(response.receipt)
        #expect(receipt.style == .appReceipt)
        #expect(receipt.bundleID == "com.mbaasy.ios.demo")
        #expect(receipt.originalApplicationVersion == "1.0")
        #expect(receipt.creationDate == date(ms: 1_439_452_246_000))
        #expect(receipt.inApp.count == 7)
        #expect(receipt.inApp[0].transactionID == "1000000166865231")
        #expect(receipt.inApp[0].isTrialPeriod == false)
        #expect(receipt.inApp[1].expiresDate == date(ms: 1_439_189_672_000))
        #expect(response.latestReceiptInfo.count == 35)
        // latest_receipt_info is preferred over in_app for subscription state.
        #expect(response.subscriptionTransactions.count == 35)
    }

    @Test("iOS 6 transaction receipt: flat fields, expires_date in milliseconds (mbaasy)")
    func iOS6Receipt() throws {
        let response = try parse("mbaasy/validator_remote_subscription_transaction.json", answeredBy: .sandbox)
        #expect(response.status == .valid)
        #expect(response.environment == .sandbox)  // no `environment` in iOS 6 answers: the endpoint's
        let receipt = try #require(response.receipt)
        #expect(receipt.style == .transactionReceipt)
        #expect(receipt.bundleID == "com.mbaasy.ios.demo")
        #expect(receipt.applicationVersion == "1")
        let transaction = try #require(receipt.inApp.first)
        #expect(transaction.transactionID == "1000000181298734")
        #expect(transaction.originalTransactionID == "1000000180636226")
        #expect(transaction.productID == "yearly")
        #expect(transaction.expiresDate == date(ms: 1_448_346_881_000))
        #expect(transaction.webOrderLineItemID == "1000000030938713")
        #expect(response.latestReceiptInfo.map(\.transactionID) == ["1000000180703127"])
    }

    @Test("A refund in an iOS 6 style answer: cancellation_date as milliseconds, or as text")
    func iOS6Refund() throws {
        for cancellation in [
            #""cancellation_date":"1448346881000""#, #""cancellation_date":1448346881000"#,
            #""cancellation_date":"2015-11-24 06:34:41 Etc/GMT""#,
        ] {
            let response = try parse(
                text: """
                    {"status":0,"receipt":{"bid":"com.example.app","transaction_id":"1000000181298734",
                     "original_transaction_id":"1000000181298734","product_id":"coins","quantity":"1",
                     "purchase_date_ms":"1448346800000",\(cancellation),"cancellation_reason":"0"}}
                    """)
            let transaction = try #require(response.receipt?.inApp.first)
            #expect(transaction.cancellationDate == date(ms: 1_448_346_881_000), "\(cancellation)")
        }
    }

    @Test("21006: expired, body still used (mbaasy and venice)")
    func expiredSubscription() throws {
        let mbaasy = try parse("mbaasy/validator_remote_expired_transaction.json")
        #expect(mbaasy.status == .subscriptionExpired)
        #expect(mbaasy.status.isAuthentic)
        #expect(mbaasy.latestExpiredReceiptInfo.map(\.transactionID) == ["1000000180703127"])
        #expect(mbaasy.subscriptionTransactions.map(\.transactionID) == ["1000000180703127"])

        let venice = try parse("venice/receipt_expired_cancelled.json")
        #expect(venice.status == .subscriptionExpired)
        #expect(venice.receipt?.bundleID == "com.foo.bar")
        #expect(venice.latestExpiredReceiptInfo.first?.isTrialPeriod == true)
        #expect(venice.latestExpiredReceiptInfo.first?.isInIntroOfferPeriod == false)
    }

    @Test("pending_renewal_info and text dates (venice)")
    func pendingRenewalInfo() throws {
        let response = try parse("venice/receipt_not_expired_cancelled.json")
        #expect(response.environment == .production)
        let renewal = try #require(response.pendingRenewalInfo.first)
        #expect(renewal.autoRenewStatus == false)
        #expect(renewal.expirationIntent == 1)
        #expect(renewal.isInBillingRetryPeriod == false)
        let transaction = try #require(response.receipt?.inApp.first)
        // Only the text form is given: "2014-06-28 14:47:53 Etc/GMT".
        #expect(transaction.expiresDate == Date(timeIntervalSince1970: 1_403_966_873))
        #expect(response.receipt?.appItemID == 7_654_321)
    }

    @Test("Numbers as strings and strings as numbers are both accepted")
    func oddTypes() throws {
        let response = try parse(
            text: #"""
                {"status":"0","environment":"Production","unknown_field":{"x":[1,2]},
                 "receipt":{"bundle_id":"b","adam_id":"12","in_app":[
                   {"product_id":"p","transaction_id":1000000166865231,"original_transaction_id":"1000000166865231",
                    "quantity":"2","purchase_date_ms":1438979875000,"expires_date_ms":"1438979975000",
                    "is_trial_period":1,"web_order_line_item_id":1000000030274153,"cancellation_date":""}]},
                 "pending_renewal_info":[{"auto_renew_status":1,"expiration_intent":"2","is_in_billing_retry_period":true}],
                 "is-retryable":"false"}
                """#)
        #expect(response.status == .valid)
        let transaction = try #require(response.receipt?.inApp.first)
        #expect(transaction.transactionID == "1000000166865231")
        #expect(transaction.quantity == 2)
        #expect(transaction.isTrialPeriod == true)
        #expect(transaction.webOrderLineItemID == "1000000030274153")
        #expect(transaction.expiresDate == date(ms: 1_438_979_975_000))
        #expect(transaction.cancellationDate == nil)
        #expect(response.receipt?.appItemID == 12)
        #expect(response.pendingRenewalInfo.first?.autoRenewStatus == true)
        #expect(response.pendingRenewalInfo.first?.expirationIntent == 2)
        #expect(response.isRetryable == false)
    }

    @Test(
        "Structurally broken answers are a typed error naming the field",
        arguments: [
            ("not json", "not a JSON object"),
            ("[1,2]", "not a JSON object"),
            (#"{"environment":"Sandbox"}"#, "status"),
            (#"{"status":"abc"}"#, "status"),
            (#"{"status":0}"#, "receipt"),
            (#"{"status":0,"receipt":"x"}"#, "receipt"),
            (#"{"status":0,"receipt":{"in_app":{"a":1}}}"#, "in_app"),
            (#"{"status":0,"receipt":{"in_app":[{"product_id":"p"}]}}"#, "transaction_id"),
            (#"{"status":0,"receipt":{"in_app":[]},"latest_receipt_info":7}"#, "latest_receipt_info"),
            (#"{"status":0,"receipt":{"in_app":[]},"pending_renewal_info":{}}"#, "pending_renewal_info"),
        ])
    func brokenAnswers(body: String, field: String) throws {
        let error = #expect(throws: AppleClientError.self) { try parse(text: body) }
        #expect(error?.code == .malformedResponse)
        #expect(error?.description.contains(field) == true, "\(String(describing: error))")
    }

    @Test("Every truncation of a real answer is parsed or rejected, never a crash")
    func truncations() async throws {
        let bytes = Array(try TestEnvironment.fixture("venice/receipt_not_expired_cancelled.json"))
        let codes = try await OffPool.run {
            var codes: [AppleClientError.Code] = []
            for length in stride(from: 0, to: bytes.count, by: 7) {
                do {
                    _ = try VerifyReceiptResponse.parse(Array(bytes[..<length]), answeredBy: .production)
                } catch let error as AppleClientError {
                    codes.append(error.code)
                }
            }
            return codes
        }
        #expect(!codes.isEmpty)
        #expect(codes.allSatisfy { $0 == .malformedResponse })
    }

    @Test("Deeply nested JSON is rejected without exhausting the stack")
    func deepNesting() {
        let body = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: AppleClientError.self) { try parse(text: body) }
    }

    @Test("The JSON reader handles escapes, surrogate pairs, 64-bit integers and rejects trailing garbage")
    func jsonReader() throws {
        let json = try #require(
            LenientJSON.parse(
                Array(
                    #"{"a":"x\"y\\z\/\n\u00e9\ud83d\ude00","b":9007199254740993,"c":-1.5e3,"d":[true,false,null],"e":{}}"#
                        .utf8)))
        #expect(json["a"]?.stringValue == "x\"y\\z/\né😀")
        #expect(json["b"]?.int64Value == 9_007_199_254_740_993)
        #expect(json["c"]?.stringValue == "-1500")
        #expect(json["d"].map { if case .array(let items) = $0 { items.count } else { 0 } } == 3)
        for broken in [#"{"a":1}x"#, #"{"a":}"#, #"{"a" 1}"#, #"["a",]"#, #""\ud83d""#, #""abc"#, "-", "tru", ""] {
            #expect(LenientJSON.parse(Array(broken.utf8)) == nil, "\(broken)")
        }
    }
}
