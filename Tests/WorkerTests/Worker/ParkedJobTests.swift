import Foundation
import Messages
import Testing

@testable import Kafka
@testable import Worker

/// A parked job keeps a canonical base64 receipt decoded (three quarters of its text) and gives it back the same byte
/// for byte; every other proof, and a receipt in any other form, is kept as it came. The text is part of the job's
/// content digest, and so of its verdict's id: a receipt given back with one byte changed would change the verdict's
/// id of a redelivered job.
@Suite("Pipeline: a parked job's receipt")
struct ParkedJobTests {
    static func job(_ proof: ReceiptJob.Proof) -> ReceiptJob {
        ReceiptJob(
            jobID: "job-parked-1", accountID: "acct-parked", proof: proof, deviceID: "device-1",
            bundleID: "com.example.app", expectedProductID: "com.example.app.coins",
            submittedAt: Date(timeIntervalSince1970: 1_764_000_000), appAccountToken: UUID().uuidString)
    }

    static func parked(_ job: ReceiptJob, deflate: ReceiptDeflate? = nil) throws -> Parked<LedgerBoundJob> {
        let pending = LedgerBoundJob(job: job, local: PipelineParkingDecider.local, recordedAt: nil)
        let message = KafkaConsumerMessage(
            topicPartition: KafkaTopicPartition(topic: "receipt-jobs", partition: 0), offset: 7, key: job.messageKey,
            value: nil, headers: [], timestampMilliseconds: nil)
        return Parked(
            admitted: WorkerScheduler.Admitted(message: message, generation: 1), pending: pending, deflate: deflate)
    }

    struct ParkingFailed: Error {}

    @Test("a real app receipt, a real iOS 6 receipt and bytes of every length: kept decoded, given back exactly")
    func canonicalReceipts() throws {
        var texts = [
            try TestEnvironment.fixture("mbaasy/decoder_unified_sandbox.txt"),
            try TestEnvironment.fixture("mbaasy/decoder_transaction_sandbox.txt"),
        ].map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
        // Every padding: no '=', one, two; and a single byte.
        texts += (1...6).map { Data((0..<$0).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 200) }).base64EncodedString() }
        for text in texts {
            let job = Self.job(.receipt(text))
            let parked = try Self.parked(job)
            #expect(parked.receiptForm != nil, "\(text.prefix(16))…")
            #expect(parked.pending.job == job)
            #expect(parked.pending.job.contentDigest == job.contentDigest)
            #expect(Verdict.verdictID(for: parked.pending.job) == Verdict.verdictID(for: job))
        }
    }

    @Test("a receipt not in canonical base64, and every other proof: kept as it came")
    func otherForms() throws {
        let bytes = Data((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 73) })
        let canonical = bytes.base64EncodedString()
        let proofs: [ReceiptJob.Proof] = [
            .receipt(bytes.base64EncodedString(options: .lineLength64Characters)),  // line breaks
            .receipt(bytes.base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed])),
            .receipt(" " + canonical),  // a leading space
            .receipt(canonical + "\n"),  // a trailing line feed
            .receipt(String(canonical.dropLast(2))),  // "Tg==" → "Tg": unpadded (200 bytes: two '=')
            .receipt(canonical.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")),
            .receipt("QR=="),  // decodes to "A" but is not what encoding "A" gives ("QQ==")
            .receipt("not base64 at all!"),
            .receipt("AAAA AAAA"),
            .signedTransaction("eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.c2ln"),
            .transactionID("2000000123456789"),
            .notification("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"),
        ]
        #expect(canonical.contains("+") || canonical.contains("/"), "the URL-safe case changes something")
        for proof in proofs {
            let job = Self.job(proof)
            let parked = try Self.parked(job)
            #expect(parked.receiptForm == nil, "\(proof.value.prefix(24))")
            #expect(parked.pending.job == job)
            #expect(parked.pending.job.contentDigest == job.contentDigest)
        }
    }

    @Test("decoding and encoding agree with Foundation for every length, and refuse every other form")
    func base64AgainstFoundation() {
        var random = SystemRandomNumberGenerator()
        for length in 0...300 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let text = Data(bytes).base64EncodedString()
            #expect(ProofPacking.text(of: bytes) == text, "\(length) bytes")
            #expect(ProofPacking.canonicalBase64Decoded(text) == (length == 0 ? nil : bytes), "\(length) bytes")
        }
        // Every single letter changed in a short text, at every place: decoded only if Foundation decodes it to
        // bytes whose canonical text it is.
        let base = Array(Data([0xFB, 0xEF, 0x00, 0x41, 0x7F]).base64EncodedString().utf8)  // "++8AQX8="
        for place in base.indices {
            for letter in UInt8(0)...UInt8(255) {
                var changed = base
                changed[place] = letter
                let text = String(decoding: changed, as: UTF8.self)
                let foundation = Data(base64Encoded: text).map { [UInt8]($0) }
                let canonical = foundation.flatMap { Data($0).base64EncodedString() == text ? $0 : nil }
                #expect(ProofPacking.canonicalBase64Decoded(text) == canonical, "\(text)")
            }
        }
    }

    static func receiptFixture(_ path: String) throws -> String {
        String(decoding: try TestEnvironment.fixture(path), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("real receipts deflate against another of their kind to a third or a half, and come back exactly")
    func deflatedAgainstTheirKind() throws {
        let deflate = ReceiptDeflate()
        // Two different sandbox app receipts (PKCS#7), two iOS 6 transaction receipts: the first of each kind
        // becomes its dictionary and is kept decoded only; the second deflates against it.
        let receipts = try [
            "mbaasy/decoder_unified_sandbox.txt", "mbaasy/decoder_transaction_sandbox.txt",
            "mbaasy/validator_receipts_unified.txt", "mbaasy/decoder_transaction_production.txt",
        ].map(Self.receiptFixture)
        for (index, text) in receipts.enumerated() {
            let job = Self.job(.receipt(text))
            let parked = try Self.parked(job, deflate: deflate)
            let form = try #require(parked.receiptForm)
            if index < 2 {
                #expect(form.keptBytes == form.decodedBytes, "the first of its kind is the dictionary")
            } else {
                // Apple's app receipts share their certificate chain: under a third. The iOS 6 receipts, of two
                // apps and environments, share less: under a half.
                let share = index == 2 ? 3 : 2
                #expect(form.keptBytes * share < form.decodedBytes, "\(form.keptBytes) of \(form.decodedBytes) bytes")
            }
            #expect(parked.pending.job == job)
            #expect(parked.pending.job.contentDigest == job.contentDigest)
        }
    }

    @Test("a receipt that does not deflate smaller is kept decoded; the dictionary changes every refreshEvery")
    func deflateLimits() throws {
        let deflate = ReceiptDeflate(refreshEvery: 2)
        var random = SystemRandomNumberGenerator()
        let noise = { (count: Int) in [UInt8(0x30)] + (1..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        let dictionary = noise(3_000)
        #expect(deflate.deflate(dictionary) == nil, "the first of its kind becomes the dictionary")
        #expect(deflate.deflate(noise(3_000)) == nil, "random bytes do not deflate smaller")
        var similar = dictionary
        similar[1_500] ^= 0xFF
        let deflated = try #require(deflate.deflate(similar), "the second use of the dictionary")
        #expect(deflated.bytes.count < 100)
        // Kept in an array of its own size, not in the room it was deflated into (which would save nothing).
        #expect(deflated.bytes.capacity < 2 * deflated.bytes.count + 32, "capacity \(deflated.bytes.capacity)")
        #expect(deflate.inflate(deflated) == similar)
        #expect(deflate.deflate(similar) == nil, "after two uses the next receipt becomes the dictionary")
        let next = try #require(deflate.deflate(similar), "deflated against the new dictionary, itself")
        #expect(next.bytes.count < 60)
        #expect(deflated.dictionary !== next.dictionary)
        #expect(deflate.inflate(deflated) == similar, "the old dictionary lives with what was deflated against it")
        // Another kind (its first byte) has a dictionary of its own.
        #expect(deflate.deflate([UInt8(ascii: "{")] + similar.dropFirst()) == nil)
        // Damaged bytes never inflate to a receipt of the expected size.
        let damaged = ReceiptDeflate.Deflated(
            bytes: Array(deflated.bytes.prefix(deflated.bytes.count / 2)), dictionary: deflated.dictionary,
            count: deflated.count)
        #expect(deflate.inflate(damaged) == nil)
    }

    @Test("the same job parked for the ledger and then for Apple: the same proof at every step")
    func throughBothStages() throws {
        let deflate = ReceiptDeflate()
        var bytes = (0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
        let text = Data(bytes).base64EncodedString()
        // The first receipt of its kind (its first byte) becomes the dictionary; the job's is deflated against it.
        bytes[1_500] ^= 0xFF
        _ = try Self.parked(Self.job(.receipt(Data(bytes).base64EncodedString())), deflate: deflate)
        let job = Self.job(.receipt(text))
        let forLedger = try Self.parked(job, deflate: deflate)
        let pending = forLedger.pending
        let next = StoreBoundJob(
            job: pending.job, local: pending.local, recordedAt: nil,
            deadline: ContinuousClock.now.advanced(by: .seconds(60)))
        // Parked again for Apple: the receipt kept as the ledger stage kept it, not decoded and deflated again.
        let forApple = try #require(forLedger.parkedAgain(next, given: pending.job))
        let ledgerForm = try #require(forLedger.receiptForm)
        let appleForm = try #require(forApple.receiptForm)
        #expect(appleForm == ledgerForm)
        #expect(appleForm.keptBytes < appleForm.decodedBytes, "deflated")
        #expect(forApple.pending.job == job)
        #expect(forApple.pending.job.proof.value.utf8.count == text.utf8.count)
        // A job the step changed is parked anew, never with the earlier receipt.
        var changed = next
        changed.job.accountID = "acct-other"
        #expect(forLedger.parkedAgain(changed, given: pending.job) == nil)
        let fresh = Parked(admitted: forLedger.admitted, pending: next)
        #expect(fresh.pending.job == job)
    }
}
