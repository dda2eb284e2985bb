import Decision
import Foundation
import Messages
import Receipts
import Testing

/// The byte-level fast paths (base64 groups, OpenStep scanning) must read exactly what the careful paths read.
@Suite("Receipts: byte-level decoding")
struct ReceiptDecodingTests {
    /// A small deterministic generator, so a failure can be replayed.
    struct ReceiptsDecodingRandom {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    }

    @Test("Base64 agrees with Foundation over random lengths, line breaks, missing padding and both alphabets")
    func base64MatchesFoundation() {
        var random = ReceiptsDecodingRandom(state: 42)
        for length in 0..<400 {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let encoded = Array(Data(bytes).base64EncodedString().utf8)
            #expect(Base64.decode(encoded) == bytes)
            var wrapped: [UInt8] = []
            for (index, byte) in encoded.enumerated() {
                if index > 0 && random.below(7) == 0 { wrapped += random.below(2) == 0 ? [0x0A] : [0x0D, 0x0A, 0x09] }
                wrapped.append(byte)
            }
            #expect(Base64.decode(wrapped) == bytes, "length \(length)")
            let unpadded = encoded.filter { $0 != UInt8(ascii: "=") }
            let urlSafe = unpadded.map {
                $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0
            }
            #expect(Base64.decode(urlSafe) == bytes)
            let spaced = encoded.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }
            #expect(Base64.decode(spaced) == bytes)
        }
        #expect(Base64.decode(Array("QUJD!".utf8)) == nil)
        #expect(Base64.decode(Array("QUJDR".utf8)) == nil)  // one dangling character
        #expect(Base64.decode(Array("QUJD=garbage!".utf8)) == Array("ABC".utf8))  // stops at the first '='
    }

    @Test("Normalization takes base64 only when every byte is base64, padding or whitespace")
    func normalizationBoundaries() throws {
        #expect(try ReceiptInput.normalize(Array("QUJD".utf8)) == Array("ABC".utf8))
        #expect(try ReceiptInput.normalize(Array("QUJD\r\nREVG\n".utf8)) == Array("ABCDEF".utf8))
        #expect(try ReceiptInput.normalize(Array("QUJD=REVG".utf8)) == Array("ABC".utf8))
        // Not base64: a byte after the padding is no base64 character, or too few characters.
        #expect(try ReceiptInput.normalize(Array("QUJD=!".utf8)) == Array("QUJD=!".utf8))
        #expect(try ReceiptInput.normalize(Array("QU".utf8)) == Array("QU".utf8))
        #expect(try ReceiptInput.normalize(Array("Q U".utf8)) == Array("Q U".utf8))
        let spaced = try #require(Base64.decode(Array("Q+UJDREV".utf8)))
        #expect(try ReceiptInput.normalize(Array("Q UJDREV".utf8)) == spaced)
        // Text that looks like base64 but cannot decode (one dangling character) is kept as it is.
        #expect(try ReceiptInput.normalize(Array("QUJDR".utf8)) == Array("QUJDR".utf8))
    }

    static func transactionReceipt(outer: String) -> [UInt8] { Array(Data(outer.utf8).base64EncodedString().utf8) }

    static func purchaseInfo(_ entries: String) -> String { Data(entries.utf8).base64EncodedString() }

    @Test("iOS 6 OpenStep: escapes, duplicate keys, unquoted values, signed integers")
    func openStepDetails() throws {
        let info = Self.purchaseInfo(
            #"{ "bid" = "com.example.\"quoted\""; "transaction-id" = "1"; "transaction-id" = "2"; quantity = +3; "#
                + #""purchase-date-ms" = "1335798355868"; "expires-date" = "99999999999999999999"; }"#)
        let analysis = ReceiptsTestSupport.analyzer.analyze(
            Self.transactionReceipt(outer: #"{ "purchase-info" = "\#(info)"; "environment" = Sandbox; }"#))
        #expect(analysis.format == .transactionReceipt)
        #expect(analysis.bundleID == #"com.example."quoted""#)
        #expect(analysis.environment == .sandbox)
        let transaction = try #require(analysis.transactions.first)
        #expect(transaction.transactionID == "2")
        #expect(transaction.quantity == 3)
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_335_798_355.868))
        #expect(transaction.expiresDate == nil)  // overflows Int64: absent, as before
        #expect(analysis.signature.code == "invalid")
    }

    @Test("iOS 6 OpenStep: broken text is not a receipt, with a reason")
    func openStepFailures() {
        let info = Self.purchaseInfo(#"{ "transaction-id" = "1"; }"#)
        let many = (0..<300).map { "\"k\($0)\" = \"v\";" }.joined()
        for outer in [
            #"{ "purchase-info" = "\#(info)"; "signature" = "unterminated; }"#,
            #"{ "signature" = "AAAA"; }"#,
            #"{ "purchase-info" = "!!!!"; }"#,
            #"{ "purchase-info" = "\#(Self.purchaseInfo(#"{ "bid" = "x"; }"#))"; }"#,
            #"{ "purchase-info" = "\#(info)" "#,
            "{ \(many) }",
        ] {
            let analysis = ReceiptsTestSupport.analyzer.analyze(Self.transactionReceipt(outer: outer))
            #expect(analysis.format == .unknown, "\(outer.prefix(40))")
            #expect(analysis.judgement.code == "malformed")
        }
    }

    @Test("Parse-only analysis reads every field but never vouches for a receipt")
    func parseOnly() throws {
        let analyzer = ReceiptsTestSupport.analyzer
        for path in [
            "venice/legacy_transaction_receipt_ios6.b64", "tpinappreceipt/receipt-sandbox-legacy",
            "go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws", "mbaasy/validator_receipts_unified.txt",
        ] {
            let input = try ReceiptsTestSupport.bytes(path)
            let verified = analyzer.analyze(input)
            let parsed = analyzer.analyzeWithoutVerifying(input)
            #expect(parsed.format == verified.format, "\(path)")
            #expect(parsed.bundleID == verified.bundleID)
            #expect(parsed.environment == verified.environment)
            #expect(parsed.transactions == verified.transactions)
            #expect(parsed.renewalInfo == verified.renewalInfo)
            #expect(parsed.signature.code == "not_checked")
            #expect(parsed.judgement != .locallyVerified)
        }
        #expect(
            analyzer.analyzeWithoutVerifying(try ReceiptsTestSupport.bytes("tpinappreceipt/receipt-sandbox-legacy"))
                .transactions.count == 187)
    }

    /// The same DER element with an indefinite length: `tag 0x80 contents 00 00`.
    static func indefinite(_ element: [UInt8]) -> [UInt8] {
        let headerLength = element[1] < 0x80 ? 2 : 2 + Int(element[1] & 0x7F)
        return [element[0], 0x80] + element[headerLength...] + [0x00, 0x00]
    }

    @Test("App receipt payload: BER indefinite lengths (generic reader) read the same as DER (fast scanner)")
    func berPayloadMatchesDER() throws {
        let pki = try ReceiptsTestPKI.make(rsa: true)
        let analyzer = JudgingAnalyzer(trust: pki.trust)
        let purchases = (1...40).map { (id: "10000000000000\($0 + 10)", product: "product.\($0 % 3)") }
        let der = ReceiptsTestPKI.payload(
            bundleID: "com.example.app", created: "2023-11-14T22:13:20Z", purchases: purchases)
        let reference = analyzer.analyze(try pki.pkcs7(payload: der))
        #expect(reference.signature == .valid)
        #expect(reference.transactions.count == 40)

        // The whole payload SET indefinite.
        let outer = analyzer.analyze(try pki.pkcs7(payload: Self.indefinite(der)))
        // One in-app record's SET indefinite, inside its OCTET STRING (the rest stays DER).
        let record = ReceiptsTestPKI.tlv(
            0x31,
            ReceiptsTestPKI.attribute(1703, ReceiptsTestPKI.utf8("2000000000000001"))
                + ReceiptsTestPKI.attribute(1704, ReceiptsTestPKI.ia5("2023-11-14T22:13:20+01:00")))
        let mixedPayload = ReceiptsTestPKI.tlv(
            0x31,
            Array(der[(der[1] < 0x80 ? 2 : 2 + Int(der[1] & 0x7F))...])
                + ReceiptsTestPKI.attribute(17, Self.indefinite(record)))
        let mixed = analyzer.analyze(try pki.pkcs7(payload: mixedPayload))
        let fastMixed = analyzer.analyze(
            try pki.pkcs7(
                payload: ReceiptsTestPKI.tlv(
                    0x31,
                    Array(der[(der[1] < 0x80 ? 2 : 2 + Int(der[1] & 0x7F))...]) + ReceiptsTestPKI.attribute(17, record))
            ))
        for analysis in [outer, mixed, fastMixed] {
            #expect(analysis.signature == .valid)
            #expect(analysis.bundleID == reference.bundleID)
            #expect(analysis.environment == reference.environment)
            #expect(analysis.appVersion == reference.appVersion)
            #expect(analysis.signedDate == reference.signedDate)
        }
        #expect(outer.transactions == reference.transactions)
        #expect(mixed.transactions == fastMixed.transactions)
        #expect(mixed.transactions.count == 41)
        #expect(mixed.transactions.last?.purchaseDate == RFC3339.parse("2023-11-14T21:13:20Z"))
    }
}
