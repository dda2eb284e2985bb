import Foundation
import GooglePlay
import Messages
import PlaySimulator
import Synchronization
import Testing

@testable import Traffic

/// Mints predictable purchases: token `tok-<n>`, data naming the package, product and a purchase time, signature
/// `sig-<n>`, so two generators with one seed can be compared job by job.
private final class CountingMinter: PlayPurchaseMinting {
    private let minted = Mutex(0)

    func mintPlayTrafficPurchase(
        packageName: String, productID: String, type: ProductType
    ) throws
        -> PlayTrafficPurchase
    {
        let n = minted.withLock {
            $0 += 1
            return $0
        }
        return PlayTrafficPurchase(
            purchaseToken: "tok-\(n)",
            purchaseData:
                #"{"packageName":"\#(packageName)","productId":"\#(productID)","purchaseTime":17000000000\#(n % 10),"purchaseToken":"tok-\#(n)"}"#,
            signature: "sig-\(n)")
    }
}

@Suite("Google Play traffic")
struct PlayTrafficTests {
    static let package = "com.example.verifyworker"
    static let products = [
        PlayTrafficGenerator.Product(id: "coins_100", type: .consumable),
        PlayTrafficGenerator.Product(id: "premium", type: .nonConsumable),
        PlayTrafficGenerator.Product(id: "gold", type: .autoRenewable),
    ]

    static func purchase(_ job: GeneratedJob) -> GooglePlayPurchase? {
        if case .googlePlay(let purchase) = job.job.proof { return purchase }
        return nil
    }

    static func generate(seed: UInt64, count: Int, mix: TrafficMix = .android) throws -> [GeneratedJob] {
        var generator = PlayTrafficGenerator(
            minter: CountingMinter(), packageName: package, products: products, mix: mix, seed: seed)
        return try generator.generate(count: count)
    }

    @Test("the Android mix's shares are kept within a few points over 4,000 jobs, and every kind is what it claims")
    func kindsAndProportions() throws {
        let jobs = try Self.generate(seed: 7, count: 4_000)
        let counts = Dictionary(grouping: jobs, by: \.category).mapValues(\.count)
        for (category, share) in TrafficMix.android.shares {
            let measured = Double(counts[category, default: 0]) / Double(jobs.count)
            #expect(abs(measured - share) < 0.03, "\(category): \(measured) against \(share)")
        }
        #expect(counts[.cracker] == nil, "a Play job never carries a cracker receipt")

        let genuine = jobs.filter { $0.category == .genuine }
        let genuineTokens = Set(genuine.compactMap { Self.purchase($0)?.purchaseToken })
        #expect(genuineTokens.count == genuine.count, "each genuine job is a purchase of its own")
        #expect(Set(genuine.compactMap { Self.purchase($0)?.productID }) == Set(Self.products.map(\.id)))
        let owners = Dictionary(uniqueKeysWithValues: genuine.map { (Self.purchase($0)!.purchaseToken, $0) })
        for job in jobs {
            let purchase = try #require(Self.purchase(job), "every job is a Google Play proof")
            #expect(job.job.proof.store == .googlePlay)
            switch job.category {
            case .genuine:
                #expect(purchase.packageName == Self.package)
                #expect(purchase.purchaseData != nil && purchase.signature != nil)
            case .otherApp:
                #expect(purchase.packageName != Self.package)
                #expect(purchase.signature != nil, "another app's purchase is genuine for that app")
            case .forged:
                let original = try #require(genuine.first { Self.purchase($0)?.signature == purchase.signature })
                let originalData = try #require(Self.purchase(original)?.purchaseData)
                #expect(purchase.purchaseData != originalData, "edited after signing")
                #expect(purchase.purchaseData?.count == originalData.count, "one digit changed, still well-formed")
            case .repeated:
                let original = try #require(owners[purchase.purchaseToken], "a repeat carries a genuine token")
                #expect(purchase == Self.purchase(original))
                #expect((job.job.accountID != original.job.accountID) == job.isReplayByAnotherAccount)
            case .cracker:
                Issue.record("no cracker jobs")
            }
        }
        let repeats = jobs.filter { $0.category == .repeated }
        #expect(repeats.contains { $0.isReplayByAnotherAccount } && repeats.contains { !$0.isReplayByAnotherAccount })
        #expect(Set(jobs.map(\.job.jobID)).count == jobs.count)
    }

    @Test("one seed gives the same sequence of kinds, products and accounts; another seed another")
    func deterministic() throws {
        func shape(_ jobs: [GeneratedJob]) -> [String] {
            jobs.map {
                let purchase = Self.purchase($0)
                return "\($0.category) \(purchase?.packageName ?? "") \(purchase?.productID ?? "") "
                    + "\(purchase?.purchaseToken ?? "") \($0.isReplayByAnotherAccount)"
            }
        }
        let first = try Self.generate(seed: 42, count: 500)
        let second = try Self.generate(seed: 42, count: 500)
        #expect(shape(first) == shape(second))
        #expect(first.map(\.job.proof) == second.map(\.job.proof))
        #expect(shape(try Self.generate(seed: 43, count: 500)) != shape(first))
    }

    @Test("a forgery is caught by the licensing key: the simulator's signature no longer verifies the edited data")
    func forgedSignatureFailsVerification() throws {
        let simulator = PlaySimulator()
        var generator = PlayTrafficGenerator(
            minter: simulator, packageName: Self.package, products: Self.products,
            mix: TrafficMix(shares: [.genuine: 0.5, .forged: 0.5]), seed: 3)
        let jobs = try generator.generate(count: 60)
        let key = try #require(PlayLicensingKey(text: try simulator.licensingKey(packageName: Self.package)))
        let forged = jobs.filter { $0.category == .forged }.compactMap(Self.purchase)
        let genuine = jobs.filter { $0.category == .genuine }.compactMap(Self.purchase)
        #expect(!forged.isEmpty && !genuine.isEmpty)
        for purchase in genuine {
            #expect(key.isValidSignature(purchase.signature ?? "", for: Data((purchase.purchaseData ?? "").utf8)))
        }
        for purchase in forged {
            #expect(!key.isValidSignature(purchase.signature ?? "", for: Data((purchase.purchaseData ?? "").utf8)))
        }
    }

    @Test("interleaving keeps each store's order and every job, and spreads Play jobs over the run")
    func interleave() throws {
        let apple = (0..<600).map {
            GeneratedJob(
                category: .otherApp, job: ReceiptJob(jobID: "a-\($0)", accountID: "a", proof: .receipt("x")))
        }
        let play = try Self.generate(seed: 1, count: 400)
        let merged = PlayTrafficGenerator.interleave(appStore: apple, play: play, seed: 9)
        #expect(merged.count == 1_000)
        #expect(merged.filter { $0.job.proof.store == .appStore }.map(\.job.jobID) == apple.map(\.job.jobID))
        #expect(merged.filter { $0.job.proof.store == .googlePlay }.map(\.job.jobID) == play.map(\.job.jobID))
        let firstHalfPlay = merged.prefix(500).filter { $0.job.proof.store == .googlePlay }.count
        #expect((150...250).contains(firstHalfPlay), "\(firstHalfPlay) Play jobs in the first half")
        #expect(
            PlayTrafficGenerator.interleave(appStore: apple, play: play, seed: 9).map(\.job.jobID)
                == merged.map(\.job.jobID))
    }

    @Test("forging changes the last digit of purchaseTime, or appends a space to data without one")
    func forging() {
        #expect(PlayTrafficGenerator.forging(#"{"purchaseTime":1709}"#) == #"{"purchaseTime":1700}"#)
        #expect(PlayTrafficGenerator.forging(#"{"purchaseTime": 12,"a":3}"#) == #"{"purchaseTime": 13,"a":3}"#)
        #expect(PlayTrafficGenerator.forging("{}") == "{} ")
    }
}
