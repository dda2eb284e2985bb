import Foundation
import Messages
import Receipts
import Testing
import Traffic

/// Mutated receipts of every format must neither crash nor hang the analyzer. CI runs a small count;
/// `RECEIPTS_FUZZ_COUNT=1000000 swift test --filter ReceiptFuzzTests` (or `verify-worker bench receipts --fuzz N`)
/// runs the long mode.
@Suite("Receipts: fuzz")
struct ReceiptFuzzTests {
    static var count: Int {
        ProcessInfo.processInfo.environment["RECEIPTS_FUZZ_COUNT"].flatMap(Int.init) ?? 20_000
    }

    @Test("Mutations across formats: no crash, bounded time per input", .timeLimit(.minutes(10)))
    func mutations() async throws {
        var seeds: [[UInt8]] = []
        for path in [
            "mbaasy/validator_receipts_unified.txt", "tpinappreceipt/receipt-xcode",
            "venice/legacy_transaction_receipt_ios6.b64", "go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws",
            "apple-swift/mock_signed_data/testNotification", "apple-swift/xcode/xcode-app-receipt-with-transaction",
        ] {
            let text = try ReceiptsTestSupport.bytes(path)
            seeds.append(text)
            if let raw = Base64.decode(text), !path.hasSuffix(".jws"), !path.contains("mock_signed") {
                seeds.append(raw)
                // The decoded OpenStep text of iOS 6 receipts too.
            }
        }
        let analyzer = try ReceiptsTestSupport.testAnalyzer(allowXcode: true)
        let fuzzSeeds = seeds
        let report = try await OffPool.run {
            ReceiptFuzzer(seeds: fuzzSeeds).run(count: Self.count, analyzer: analyzer.analyzer)
        }
        #expect(report.inputs == Self.count)
        // The largest seed is ~10 KB: anything near a second would mean super-linear work somewhere.
        #expect(report.slowestSeconds < 1.0)
        #expect(report.formatCounts.count >= 3)
    }

    @Test("Pathological BER: deep indefinite nesting and huge lengths are rejected quickly")
    func pathologicalBER() {
        let analyzer = ReceiptsTestSupport.analyzer
        let signedData: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
        var deep: [UInt8] = [0x30, 0x80] + signedData
        deep += Array(repeating: [0xA0, 0x80], count: 10_000).flatMap { $0 }
        #expect(analyzer.analyze(deep).format == .unknown)
        let huge: [UInt8] = [0x30, 0x84, 0x7F, 0xFF, 0xFF, 0xFF] + signedData + [0xA0, 0x84, 0x7F, 0xFF, 0xFF, 0xF0]
        #expect(analyzer.analyze(huge).format == .unknown)
        let unterminated: [UInt8] = [0x30, 0x80] + signedData + [0x24, 0x80, 0x04, 0x01, 0x00]
        #expect(analyzer.analyze(unterminated).format == .unknown)
    }
}
