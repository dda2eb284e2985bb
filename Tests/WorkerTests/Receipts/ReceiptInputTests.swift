import Decision
import Foundation
import Messages
import Receipts
import Testing

@Suite("Receipts: input normalization and dates")
struct ReceiptInputTests {
    @Test("Standard, URL-safe, unpadded, wrapped and space-for-plus base64 all decode the same receipt")
    func base64Variants() throws {
        let text = String(decoding: try ReceiptsTestSupport.bytes("tamtamchik/validReceipt.b64"), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(text.contains("+"))
        let urlSafe = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let unpadded = text.replacingOccurrences(of: "=", with: "")
        var wrapped = ""
        for (index, character) in text.enumerated() {
            if index > 0 && index % 76 == 0 { wrapped += "\r\n" }
            wrapped.append(character)
        }
        let formMangled = text.replacingOccurrences(of: "+", with: " ")
        let expected = try ReceiptInput.normalize(Array(text.utf8))
        for variant in [urlSafe, unpadded, wrapped, formMangled, "  \n" + text + "\n"] {
            #expect(try ReceiptInput.normalize(Array(variant.utf8)) == expected)
            #expect(ReceiptsTestSupport.analyzer.analyze(Array(variant.utf8)).signature == .valid)
        }
        // Raw DER passes through unchanged.
        #expect(try ReceiptInput.normalize(expected) == expected)
    }

    @Test("Size limit applies before decoding; empty input is rejected")
    func limits() {
        #expect(throws: ReceiptInput.Rejection.self) {
            try ReceiptInput.normalize(Array(repeating: UInt8(ascii: "Q"), count: 1_500_000))
        }
        #expect(throws: ReceiptInput.Rejection.empty) { try ReceiptInput.normalize(Array(" \n".utf8)) }
        #expect((try? ReceiptInput.normalize(Array(repeating: UInt8(ascii: "Q"), count: 1_000_000))) != nil)
    }

    @Test("RFC 3339 dates with Z, numeric offsets and fractions")
    func dates() {
        let reference = Date(timeIntervalSince1970: 1_697_679_936)  // 2023-10-19T01:45:36Z
        #expect(RFC3339.parse("2023-10-19T01:45:36Z") == reference)
        #expect(RFC3339.parse("2023-10-19T02:45:36+0100") == reference)
        #expect(RFC3339.parse("2023-10-19T02:45:36+01:00") == reference)
        #expect(RFC3339.parse("2023-10-18T20:45:36-05:00") == reference)
        #expect(RFC3339.parse("2023-10-19T01:45:36.5Z") == reference.addingTimeInterval(0.5))
        #expect(RFC3339.parse("4001-01-01T00:00:00Z") != nil)
        for bad in ["", "2023-10-19", "2023-13-19T01:45:36Z", "2023-10-19T01:45:36", "2023-10-19T01:45:36+1", "x"] {
            #expect(RFC3339.parse(bad) == nil, "\(bad)")
        }
        #expect(RFC3339.format(reference, precision: .millisecondsWhenPresent) == "2023-10-19T01:45:36Z")
        // Apple's "year 0001" (-62135769600 s) is 0001-01-01 in the Julian calendar, 0000-12-30 proleptic Gregorian.
        let yearZero = Date(timeIntervalSince1970: -62_135_769_600)
        #expect(RFC3339.format(yearZero, precision: .millisecondsWhenPresent) == "0000-12-30T00:00:00Z")
        #expect(RFC3339.parse("0000-12-30T00:00:00Z") == Date(timeIntervalSince1970: -62_135_769_600))
    }

    @Test("Compact iOS 6 form (seed 000) with a bogus signature is not authenticated")
    func compactTransactionReceipt() {
        let info = Data(
            #"{"unique-identifier"="u1";"purchase-date"="2012-02-18 19:23:27 Etc/GMT";"original-transaction-id"="0123456789";"quantity"="1";"bvrs"="123";"product-id"="com.example.application.product.1";"item-id"="456";"transaction-id"="0123456789";"bid"="com.example.application";}"#
                .utf8
        ).base64EncodedString()
        let receipt = #"{"signing-status"="0";"purchase-info"="\#(info)";"pid"="143";"signature"="1POdP1sD4jEe5t=";}"#
        let analysis = ReceiptsTestSupport.analyzer.analyze(Array(Data(receipt.utf8).base64EncodedString().utf8))
        #expect(analysis.format == .transactionReceipt)
        #expect(analysis.bundleID == "com.example.application")
        #expect(analysis.environment == .production)
        #expect(analysis.transactions.first?.transactionID == "0123456789")
        #expect(analysis.transactions.first?.quantity == 1)
        #expect(analysis.signature.code == "invalid")
        #expect(analysis.judgement.code == "not_authenticated")
    }
}
