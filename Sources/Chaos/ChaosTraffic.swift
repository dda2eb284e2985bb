import AppleSimulator
import Foundation
import Messages
import RateLimiter
import Receipts
import Traffic

/// The app a chaos run verifies for, and its catalog (written to the workers' catalog file).
public enum ChaosApp {
    public static let bundleID = "com.example.verifyworker"
    public static let consumable = "com.example.verifyworker.coins100"
    public static let nonConsumable = "com.example.verifyworker.premium"
    public static let nonRenewing = "com.example.verifyworker.seasonpass"
    public static let subscription = "com.example.verifyworker.monthly"

    public static let catalog = Catalog(
        bundleIDs: [bundleID],
        products: [
            .init(id: consumable, type: .consumable), .init(id: nonConsumable, type: .nonConsumable),
            .init(id: nonRenewing, type: .nonRenewing), .init(id: subscription, type: .autoRenewable),
        ])
}

/// One message to produce to `receipt-jobs`.
public struct ChaosMessage: Sendable {
    public var key: [UInt8]
    public var value: [UInt8]
}

/// Everything a run submits, in order, with what each job is known to be.
public struct ChaosTraffic: Sendable {
    /// The messages in submission order. Messages meant to race (the same proof from several accounts, the same job
    /// twice) are adjacent, so they are produced in the same burst.
    public var messages: [ChaosMessage] = []
    /// One entry per distinct job id.
    public var jobs: [ChaosSubmittedJob] = []
    /// Keys of the deliberately malformed messages.
    public var malformedKeys: Set<String> = []
    /// Submitted messages per case, for the summary.
    public var cases: [String: Int] = [:]
    /// The burst each message belongs to (messages of one burst are produced together).
    var bursts: [Int] = []
    private var openBurst: Int?
    private var burstCount = 0

    public init() {}

    /// Messages added inside `body` form one burst.
    public mutating func burst(_ body: (inout ChaosTraffic) throws -> Void) rethrows {
        openBurst = burstCount
        burstCount += 1
        defer { openBurst = nil }
        try body(&self)
    }

    public mutating func append(_ message: ChaosMessage) {
        messages.append(message)
        if let openBurst {
            bursts.append(openBurst)
        } else {
            bursts.append(burstCount)
            burstCount += 1
        }
    }

    mutating func add(_ job: ReceiptJob, grantable: String?, category: String, mustBeRejected: Bool = false) {
        append(ChaosMessage(key: job.messageKey, value: MessageCodec().encode(job)))
        jobs.append(
            ChaosSubmittedJob(
                jobID: job.jobID, accountID: job.accountID, grantableTransactionID: grantable,
                mustBeRejected: mustBeRejected, category: category, contentDigest: job.contentDigest))
        cases[category, default: 0] += 1
    }

    /// The same message again (same job id): must get the identical verdict.
    mutating func repeatLast(category: String) {
        guard let last = messages.last else { return }
        append(last)
        cases[category, default: 0] += 1
    }

    mutating func addMalformed(key: String, value: [UInt8], category: String) {
        append(ChaosMessage(key: Array(key.utf8), value: value))
        malformedKeys.insert(key)
        cases[category, default: 0] += 1
    }
}

/// Builds a run's traffic: the seed-000 mix minted by a simulator, plus the adversarial cases.
public struct ChaosTrafficBuilder {
    public var simulator: AppleSimulator
    public var seed: UInt64
    /// Whether the deployment accepts sandbox purchases (decides whether sandbox proofs are grantable).
    public var allowSandbox: Bool
    /// Prefix of job and account ids (unique per run).
    public var runID: String
    /// Where the corpus's URL bait points (a listener that must see no connection).
    public var baitURL = "http://127.0.0.1:9/bait"
    /// Also submit refunded iOS 6 transaction receipts. Off by default: today the simulator writes an iOS 6
    /// `cancellation_date` as bare milliseconds, which the verifyReceipt client does not read, so such a refund is
    /// granted (docs/RELIABILITY.md, "Known gaps"). Default: false.
    public var ios6Refunds = false
    /// The largest corpus message submitted (see ``AdversarialJobCorpus/maximumSize``). Default: 200 000 bytes.
    public var fuzzMaximumSize = 200_000
    /// ``AdversarialJobCorpus/heavyShare`` of the corpus messages. Default: 1.
    public var fuzzHeavyShare = 1.0

    /// `jobs` seed-mix jobs, then about 5% more adversarial ones, malformed messages and `fuzz` corpus messages, all
    /// shuffled in bursts so that faults meet every kind.
    public func build(jobs: Int, fuzz: Int) throws -> ChaosTraffic {
        var traffic = ChaosTraffic()
        var generator = SeedTrafficGenerator(
            simulator: simulator, bundleID: ChaosApp.bundleID,
            productIDs: [ChaosApp.consumable, ChaosApp.nonConsumable, ChaosApp.nonRenewing], mix: .seed000,
            sandboxShare: 0.2, seed: seed)
        let generated = try generator.generate(count: jobs)
        var grantable: [String: Bool] = [:]  // transaction id → authentic and allowed
        for item in generated {
            var transaction: String?
            if item.category == .genuine || item.category == .repeated, let id = item.transactionID {
                let allowed = allowSandbox || item.environment != .sandbox
                if item.category == .genuine { grantable[id] = allowed }
                transaction = (grantable[id] ?? false) ? id : nil
            }
            traffic.add(item.job, grantable: transaction, category: item.category.rawValue)
        }

        let adversarial = max(1, jobs / 100)
        var sequence = 0
        func nextJob(_ proof: ReceiptJob.Proof, account: String? = nil) -> ReceiptJob {
            sequence += 1
            return ReceiptJob(
                jobID: "\(runID)-adv-\(sequence)", accountID: account ?? "\(runID)-adv-acct-\(sequence)", proof: proof,
                bundleID: ChaosApp.bundleID, submittedAt: Date())
        }
        func proof(_ minted: MintedReceipt, _ format: SimulatedReceiptFormat) -> ReceiptJob.Proof {
            format == .signedTransaction ? .signedTransaction(minted.receipt) : .receipt(minted.receipt)
        }
        /// A new purchase of the chaos app's consumable.
        func mintConsumable(
            _ format: SimulatedReceiptFormat, environment: AppleEnvironment = .production
        ) throws -> MintedReceipt {
            try simulator.mint(
                MintRequest(
                    bundleId: ChaosApp.bundleID, productId: ChaosApp.consumable, format: format,
                    environment: environment))
        }
        let formats = SimulatedReceiptFormat.allCases
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)

        for index in 0..<adversarial {
            let format = formats[index % formats.count]
            // The same new purchase submitted at once by three accounts: exactly one may get it.
            let contested = try simulator.mint(
                MintRequest(
                    bundleId: ChaosApp.bundleID, productId: ChaosApp.nonConsumable, format: format,
                    environment: .production))
            traffic.burst { traffic in
                for _ in 0..<3 {
                    traffic.add(
                        nextJob(proof(contested, format)), grantable: contested.transaction.transactionId,
                        category: "concurrent_cross_account")
                }
            }
            // The same job twice (a frontend retry): one decision, identical verdicts.
            let twice = try mintConsumable(format)
            traffic.burst { traffic in
                traffic.add(
                    nextJob(proof(twice, format)), grantable: twice.transaction.transactionId,
                    category: "same_job_twice")
                traffic.repeatLast(category: "same_job_twice")
            }
            // One job id reused with another content, in both orders (a consumer de-duplicating on `verdict_id` must
            // never drop a grant). Junk first, from another account, then the genuine purchase under its id (the
            // junk is never recorded, so the order across their partitions does not matter):
            let squatted = try mintConsumable(format)
            let genuine = nextJob(proof(squatted, format))
            var squatter = genuine
            squatter.accountID = "\(runID)-adv-squatter-\(sequence)"
            squatter.proof = .receipt("abc")
            traffic.burst { traffic in
                traffic.add(squatter, grantable: nil, category: "job_id_reused", mustBeRejected: true)
                traffic.add(genuine, grantable: squatted.transaction.transactionId, category: "job_id_reused")
            }
            // A grant first, then junk and another genuine purchase of the same account under its id (one account:
            // one partition, in order): the reuses are rejected under ids of their own, the second purchase is not
            // granted under an id that was another's (`job_id_reused`).
            let firstPurchase = try mintConsumable(format)
            let secondPurchase = try mintConsumable(format)
            let granted = nextJob(proof(firstPurchase, format))
            var junkAfter = granted
            junkAfter.proof = .receipt("abc")
            var otherAfter = granted
            otherAfter.proof = proof(secondPurchase, format)
            traffic.burst { traffic in
                traffic.add(granted, grantable: firstPurchase.transaction.transactionId, category: "job_id_reused")
                traffic.add(junkAfter, grantable: nil, category: "job_id_reused", mustBeRejected: true)
                traffic.add(otherAfter, grantable: nil, category: "job_id_reused", mustBeRejected: true)
            }
            // A sandbox purchase sent to a production deployment.
            let sandbox = try mintConsumable(format, environment: .sandbox)
            traffic.add(
                nextJob(proof(sandbox, format)), grantable: allowSandbox ? sandbox.transaction.transactionId : nil,
                category: "sandbox_receipt")
            // An expired subscription: authentic, but nothing to grant.
            var expired = MintRequest(
                bundleId: ChaosApp.bundleID, productId: ChaosApp.subscription, format: format, environment: .production)
            expired.purchaseDateMs = nowMs - 2 * 3_600_000
            expired.expiresDateMs = nowMs - 3_600_000
            traffic.add(
                nextJob(proof(try simulator.mint(expired), format)), grantable: nil, category: "expired_subscription")
            // Active subscriptions, granted: the notification family renews, expires, extends, refunds and revokes
            // them (three per block, so the short run has a dozen).
            for _ in 0..<3 {
                var subscription = MintRequest(
                    bundleId: ChaosApp.bundleID, productId: ChaosApp.subscription, format: format,
                    environment: .production)
                subscription.expiresDateMs = nowMs + 30 * 86_400_000
                let active = try simulator.mint(subscription)
                traffic.add(
                    nextJob(proof(active, format)), grantable: active.transaction.transactionId,
                    category: "active_subscription")
            }
            // A refunded purchase. A StoreKit 2 JWS signed before the refund cannot show it, so refunds use the
            // formats whose state Apple holds.
            if format == .appReceipt || (format == .transactionReceipt && ios6Refunds) {
                var active = MintRequest(
                    bundleId: ChaosApp.bundleID, productId: ChaosApp.subscription, format: format,
                    environment: .production)
                active.expiresDateMs = nowMs + 30 * 86_400_000
                let refunded = try simulator.mint(active)
                _ = try simulator.refund(transactionId: refunded.transaction.transactionId)
                traffic.add(nextJob(proof(refunded, format)), grantable: nil, category: "refunded")
            }
        }

        // Deliberately malformed messages: the dead-letter topic, nothing else.
        let malformed: [[UInt8]] = [
            Array("not json at all".utf8), Array("{\"schema\":\"receipt-job/v1\",\"job_id\":".utf8),
            Array("{\"schema\":\"receipt-job/v0\",\"job_id\":\"x\",\"account_id\":\"y\",\"receipt\":\"MIIT\"}".utf8),
            Array("{\"schema\":\"receipt-job/v1\",\"job_id\":\"x\",\"account_id\":\"y\"}".utf8), [],
            [0xFF, 0xFE, 0x00, 0x7B],
        ]
        for index in 0..<max(6, jobs / 200) {
            traffic.addMalformed(
                key: "\(runID)-malformed-\(index)", value: malformed[index % malformed.count], category: "malformed")
        }

        // The adversarial corpus: each message a dead letter or a rejected job.
        // Mutation seeds are other apps' authentic receipts: a mutation that leaves one intact is still not this app's.
        let seeds = generated.filter { $0.category == .otherApp }.prefix(24).map(\.job.proof.value)
        var corpus = AdversarialJobCorpus(receiptSeeds: Array(seeds), seed: seed ^ 0xF022, tag: "\(runID)-fuzz")
        // The mock broker takes messages up to 1 MB and keeps ~5 MB per partition: live fuzz stays well below.
        corpus.maximumSize = fuzzMaximumSize
        corpus.heavyShare = fuzzHeavyShare
        corpus.baitURL = baitURL
        let codec = MessageCodec()
        for _ in 0..<fuzz {
            let message = corpus.next()
            // A message and its follow-up (a normal job on the same key) form one burst: sent in this order, the
            // follow-up must be decided behind it.
            traffic.burst { traffic in
                for (index, value) in ([message.value] + (message.followUp.map { [$0] } ?? [])).enumerated() {
                    switch AdversarialJobCorpus.classify(value, codec: codec) {
                    case .deadLetter:
                        traffic.addMalformed(key: message.key, value: value, category: "fuzz_dead_letter")
                    case .job(let job):
                        let category = index == 0 ? "fuzz_job" : "fuzz_follow_up"
                        traffic.append(ChaosMessage(key: Array(message.key.utf8), value: value))
                        traffic.jobs.append(
                            ChaosSubmittedJob(
                                jobID: job.jobID, accountID: job.accountID, grantableTransactionID: nil,
                                mustBeRejected: true, category: category, contentDigest: job.contentDigest))
                        traffic.cases[category, default: 0] += 1
                    }
                }
            }
        }
        traffic.shuffleBursts(seed: seed)
        return traffic
    }
}

extension ChaosTraffic {
    /// The range cut into chains: the messages of one burst with one key, in traffic order. A frontend that keeps one
    /// account's jobs in order sends the next only after the previous one's delivery report (a send that must be
    /// repeated would otherwise land behind its successor), so each chain is sent message after message; chains go
    /// concurrently. Several accounts of one burst still race.
    public func chains(_ range: Range<Int>) -> [[Int]] {
        var chains: [[Int]] = []
        var open: [ChainKey: Int] = [:]
        for index in range {
            let burst = index < bursts.count ? bursts[index] : -1 - index
            let key = ChainKey(burst: burst, key: messages[index].key)
            if let chain = open[key] {
                chains[chain].append(index)
            } else {
                open[key] = chains.count
                chains.append([index])
            }
        }
        return chains
    }

    private struct ChainKey: Hashable {
        var burst: Int
        var key: [UInt8]
    }

    /// Shuffles the bursts with a seeded generator, keeping each burst's messages together and in order, so faults
    /// meet every kind of message and the racing groups still race.
    public mutating func shuffleBursts(seed: UInt64) {
        var groups: [Int: [ChaosMessage]] = [:]
        var order: [Int] = []
        for (message, burst) in zip(messages, bursts) {
            if groups[burst] == nil { order.append(burst) }
            groups[burst, default: []].append(message)
        }
        var random = SplitMix64(seed: seed ^ 0xB0B5)
        order.shuffle(using: &random)
        messages = order.flatMap { groups[$0] ?? [] }
        bursts = order.enumerated().flatMap { index, burst in Array(repeating: index, count: groups[burst]?.count ?? 0)
        }
    }
}
