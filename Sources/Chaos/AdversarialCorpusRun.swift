import AppleSimulator
import Decision
import Foundation
import Logging
import Messages
import Receipts
import Traffic

/// Feeds the adversarial corpus through the worker's decode and local-analysis path in-process (``MessageCodec``
/// then ``ReceiptAnalyzer``), timing each message: the in-process half of the fuzzing (`runLiveFuzz` is the live half).
public struct AdversarialCorpusRun: Sendable {
    /// What a run saw.
    public struct Report: Sendable, Codable, Hashable {
        public var inputs = 0
        public var bytes = 0
        /// Messages that are not jobs (the worker dead-letters them).
        public var deadLetters = 0
        /// Messages that decode as jobs and were analyzed.
        public var jobs = 0
        /// Local verdicts of the analyzed jobs, by code.
        public var localVerdicts: [String: Int] = [:]
        /// Messages per corpus kind.
        public var kinds: [String: Int] = [:]
        /// Jobs the analysis found authentic (`locally_verified`): must stay 0, the corpus holds no purchase.
        public var locallyVerified = 0
        /// The slowest single message (decode plus analysis), and its kind: CPU seconds of the thread that ran it,
        /// so that a busy machine does not inflate the bound that shows nothing runs away.
        public var slowestSeconds = 0.0
        public var slowestKind: String?
        public var totalSeconds = 0.0

        enum CodingKeys: String, CodingKey {
            case inputs, bytes, jobs, kinds
            case deadLetters = "dead_letters"
            case localVerdicts = "local_verdicts"
            case locallyVerified = "locally_verified"
            case slowestSeconds = "slowest_s"
            case slowestKind = "slowest_kind"
            case totalSeconds = "total_s"
        }
    }

    public var corpus: AdversarialJobCorpus
    public var analyzer: ReceiptAnalyzer
    /// How the worker judges what the analysis read (``ProofPolicy``).
    public var policy: ProofPolicy
    public var codec: MessageCodec

    public init(
        corpus: AdversarialJobCorpus, analyzer: ReceiptAnalyzer, policy: ProofPolicy = ProofPolicy(),
        codec: MessageCodec = MessageCodec()
    ) {
        self.corpus = corpus
        self.analyzer = analyzer
        self.policy = policy
        self.codec = codec
    }

    /// Runs `count` messages on the calling thread.
    public func run(count: Int) -> Report {
        var corpus = self.corpus
        var report = Report()
        let clock = ContinuousClock()
        let started = clock.now
        for _ in 0..<count {
            let message = corpus.next()
            let before = ThreadCPUTime.seconds()
            let expectation = AdversarialJobCorpus.classify(message.value, codec: codec)
            var verdict: ProofJudgement?
            if case .job(let job) = expectation {
                verdict = policy.judge(analyzer.analyze(Array(job.proof.value.utf8)).facts)
            }
            let seconds = ThreadCPUTime.seconds() - before
            report.inputs += 1
            report.bytes += message.value.count
            report.kinds[message.kind.rawValue, default: 0] += 1
            if let verdict {
                report.jobs += 1
                report.localVerdicts[verdict.code, default: 0] += 1
                if verdict == .locallyVerified { report.locallyVerified += 1 }
            } else {
                report.deadLetters += 1
            }
            if seconds > report.slowestSeconds {
                report.slowestSeconds = seconds
                report.slowestKind = message.kind.rawValue
            }
        }
        report.totalSeconds = Self.seconds(started.duration(to: clock.now))
        return report
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}

extension AdversarialCorpusRun {
    /// The run `verify-worker chaos --fuzz-in-process N` makes: mutation seeds are receipts of another app minted by
    /// an in-process simulator (all three formats), analyzed with the simulator's roots trusted and the chaos
    /// catalog, as a worker of the chaos run would.
    public static func standard(seed: UInt64, maximumSize: Int = 2 << 20) throws -> AdversarialCorpusRun {
        var configuration = AppleSimulatorConfiguration()
        configuration.logger.logLevel = .critical
        let simulator = try AppleSimulator(configuration: configuration)
        var seeds: [String] = []
        for format in SimulatedReceiptFormat.allCases {
            for environment in [AppleEnvironment.production, .sandbox] {
                seeds.append(
                    try simulator.mint(
                        MintRequest(
                            bundleId: "com.other.game", productId: "com.other.game.coins", format: format,
                            environment: environment)
                    ).receipt)
            }
        }
        let policy = ProofPolicy(catalog: ChaosApp.catalog)
        let analyzer = ReceiptAnalyzer(
            trust: TrustStore.apple.adding(anchors: [simulator.pki.rsaRoot, simulator.pki.ecRoot]),
            isWorthVerifying: policy.isWorthVerifying(bundleID:))
        var corpus = AdversarialJobCorpus(receiptSeeds: seeds, seed: seed)
        corpus.maximumSize = maximumSize
        return AdversarialCorpusRun(corpus: corpus, analyzer: analyzer, policy: policy)
    }
}
