import Chaos
import Decision
import Foundation
import Messages
import Receipts
import Testing

/// The adversarial corpus through the worker's decode and analysis path, in-process: no crash, no hang, never
/// authentic. CI runs a small count; `CHAOS_CORPUS_COUNT=1000000 swift test --filter ChaosCorpusTests` (or
/// `verify-worker chaos --fuzz-in-process N`) runs the long mode.
@Suite("Chaos: adversarial corpus")
struct ChaosCorpusTests {
    static var count: Int {
        ProcessInfo.processInfo.environment["CHAOS_CORPUS_COUNT"].flatMap(Int.init) ?? 3_000
    }

    static func seeds() throws -> [String] {
        try [
            "mbaasy/validator_receipts_unified.txt", "venice/legacy_transaction_receipt_ios6.b64",
            "go-iap/real_sandbox_signedRenewalInfo_2000000335310644.jws",
        ].map { String(decoding: try TestEnvironment.fixture($0), as: UTF8.self) }
    }

    @Test("Hostile identifiers: every field meets every value; each a dead letter or a job within the rule, then a job")
    func hostileIdentifiers() throws {
        var corpus = AdversarialJobCorpus(seed: 25)
        corpus.heavyShare = 0
        let codec = MessageCodec()
        var fields = Set<String>()
        var outcomes: [String: Int] = [:]
        for message in corpus.generate(count: 16 * 200) where message.kind == .hostileIdentifier {
            let followUp = try #require(message.followUp, "a hostile identifier comes with a follow-up")
            guard case .job(let next) = AdversarialJobCorpus.classify(followUp, codec: codec) else {
                Issue.record("the follow-up of \(message.key) is not a job")
                continue
            }
            #expect(next.messageKey == Array(message.key.utf8), "the follow-up keeps the message's key")
            let text = String(decoding: message.value, as: UTF8.self)
            for field in AdversarialJobCorpus.identifierFields where text.contains("\"\(field)\"") {
                if field != "job_id", field != "account_id", field != "bundle_id" { fields.insert(field) }
            }
            switch AdversarialJobCorpus.classify(message.value, codec: codec) {
            case .deadLetter:
                outcomes["dead_letter", default: 0] += 1
            case .job(let job):
                outcomes["job", default: 0] += 1
                for id in [job.jobID, job.accountID, job.bundleID, job.deviceID, job.expectedProductID].compactMap({
                    $0
                }) {
                    #expect(Identifier.isValid(id), "\(message.key): an id outside the rule was decoded")
                }
                #expect(!ReceiptJob.isReservedAccountID(job.accountID))
            }
        }
        #expect(fields == ["device_id", "expected_product_id", "transaction_id", "app_account_token"])
        #expect(outcomes["dead_letter", default: 0] > 50 && outcomes["job", default: 0] > 10, "\(outcomes)")
    }

    @Test("Every kind: a dead letter or a job the analysis rejects, in bounded time", .timeLimit(.minutes(10)))
    func corpusThroughDecodeAndAnalysis() async throws {
        let seeds = try Self.seeds()
        let report = try await OffPool.run {
            let corpus = AdversarialJobCorpus(receiptSeeds: seeds, seed: 7)
            let policy = ProofPolicy(catalog: ChaosApp.catalog)
            let analyzer = ReceiptAnalyzer(trust: .apple, isWorthVerifying: policy.isWorthVerifying(bundleID:))
            return AdversarialCorpusRun(corpus: corpus, analyzer: analyzer, policy: policy).run(count: Self.count)
        }
        #expect(report.inputs == Self.count)
        #expect(Set(report.kinds.keys) == Set(AdversarialMessage.Kind.allCases.map(\.rawValue)))
        #expect(report.locallyVerified == 0)
        #expect(report.deadLetters > 0 && report.jobs > 0)
        // The largest message is ~1 MiB; in a debug build the slowest takes about a second of its thread's CPU.
        // Several would mean super-linear work somewhere (release figures: docs/RELIABILITY.md).
        #expect(report.slowestSeconds < 3.0, "slowest: \(report.slowestKind ?? "?") \(report.slowestSeconds) s")
    }

    @Test("The corpus is deterministic for a seed, and keys are unique")
    func deterministic() {
        var first = AdversarialJobCorpus(seed: 99, tag: "t")
        var second = AdversarialJobCorpus(seed: 99, tag: "t")
        let a = first.generate(count: 200)
        let b = second.generate(count: 200)
        #expect(a.map(\.value) == b.map(\.value))
        #expect(Set(a.map(\.key)).count == 200)
    }

    @Test("Each kind is classified as the worker's codec decodes it")
    func classification() {
        var corpus = AdversarialJobCorpus(seed: 3, tag: "c")
        for message in corpus.generate(count: 500) {
            switch AdversarialJobCorpus.classify(message.value) {
            case .deadLetter:
                #expect(throws: MessageError.self) { try MessageCodec().decodeJob(message.value) }
            case .job(let job):
                // A job keeps the key as its identity, so a live run can match verdicts to messages.
                #expect(job.jobID == message.key || job.accountID == message.key)
            }
        }
    }

    @Test("Size limits: messages one byte under, at and over each limit, never cut, jobs up to the worker's limit")
    func sizeLimits() {
        /// Sizes and whether each is a job, of the size-limit messages among `count` (the messages themselves, a
        /// megabyte each, are not kept).
        func sizeLimitMessages(_ corpus: inout AdversarialJobCorpus, count: Int) -> [(size: Int, isJob: Bool)] {
            (0..<count).compactMap { _ in
                let message = corpus.next()
                guard message.kind == .sizeLimit else { return nil }
                return (message.value.count, AdversarialJobCorpus.classify(message.value) != .deadLetter)
            }
        }
        let kinds = AdversarialMessage.Kind.allCases.count
        var corpus = AdversarialJobCorpus(seed: 12, tag: "l")
        corpus.maximumSize = 200_000
        let messages = sizeLimitMessages(&corpus, count: kinds * 80)
        let sizes = Set(messages.map(\.size))
        let expected = Set(AdversarialJobCorpus.sizeLimits.flatMap { [$0 - 1, $0, $0 + 1] })
        #expect(sizes == expected, "missing sizes: \(expected.subtracting(sizes).sorted())")
        #expect(messages.contains { $0.isJob } && messages.contains { !$0.isJob })
        #expect(messages.allSatisfy { !$0.isJob || $0.size <= 1 << 20 }, "a job over the worker's limit")
        // The small stand-ins when large forms are not allowed.
        corpus.heavyShare = 0
        let small = Set(sizeLimitMessages(&corpus, count: kinds * 40).map(\.size))
        #expect(small.isSubset(of: Set(AdversarialJobCorpus.smallSizeLimits.flatMap { [$0 - 1, $0, $0 + 1] })))
    }

    @Test("Deep nesting, invalid UTF-8 and oversized messages are dead letters")
    func notJobs() throws {
        let deep = Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)
        #expect(AdversarialJobCorpus.classify(deep) == .deadLetter)
        let huge =
            Array("{\"schema\":\"receipt-job/v1\",\"job_id\":\"a\",\"account_id\":\"b\",\"receipt\":\"".utf8)
            + Array(repeating: UInt8(ascii: "A"), count: 1 << 20) + Array("\"}".utf8)
        #expect(AdversarialJobCorpus.classify(huge) == .deadLetter)
        let invalid =
            Array("{\"schema\":\"receipt-job/v1\",\"job_id\":\"".utf8) + [0xC0, 0x80]
            + Array("\",\"account_id\":\"b\",\"receipt\":\"MIIT\"}".utf8)
        #expect(AdversarialJobCorpus.classify(invalid) == .deadLetter)
    }
}

/// The long live fuzz mode's size profile: every kind and variant, mostly small.
@Suite("Chaos: corpus size profile")
struct ChaosCorpusSizeProfileTests {
    @Test("With no large forms every kind still appears and no message passes 64 KiB")
    func smallOnly() {
        var corpus = AdversarialJobCorpus(seed: 5, tag: "s")
        corpus.heavyShare = 0
        let messages = corpus.generate(count: 1_100)
        #expect(Set(messages.map(\.kind)) == Set(AdversarialMessage.Kind.allCases))
        let largest = messages.map(\.value.count).max() ?? 0
        #expect(largest < 64 << 10, "largest: \(largest)")
    }

    @Test("A share of 1% keeps some large forms among mostly small messages")
    func mostlySmall() {
        var corpus = AdversarialJobCorpus(seed: 6, tag: "m")
        corpus.heavyShare = 0.01
        let sizes = corpus.generate(count: 5_500).map(\.value.count).sorted()
        #expect(sizes[sizes.count / 2] < 4_096, "median: \(sizes[sizes.count / 2])")
        #expect(sizes.filter { $0 > 100_000 }.count > 0)
        #expect(sizes.filter { $0 > 100_000 }.count < 5_500 / 50)
    }

    @Test("The default share leaves the message stream as it was")
    func defaultUnchanged() {
        var plain = AdversarialJobCorpus(seed: 9, tag: "d")
        var full = AdversarialJobCorpus(seed: 9, tag: "d")
        full.heavyShare = 1
        #expect(plain.generate(count: 110).map(\.value) == full.generate(count: 110).map(\.value))
    }
}
