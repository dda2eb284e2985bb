import Foundation
import Messages
import RateLimiter

/// A Google Play purchase minted for generated traffic: what Play Billing hands the app.
public struct PlayTrafficPurchase: Sendable, Hashable {
    public var purchaseToken: String
    /// `Purchase.getOriginalJson()`: the exact text the signature covers.
    public var purchaseData: String
    /// Base64 of the SHA1withRSA signature of ``purchaseData`` by the app's licensing key.
    public var signature: String

    public init(purchaseToken: String, purchaseData: String, signature: String) {
        self.purchaseToken = purchaseToken
        self.purchaseData = purchaseData
        self.signature = signature
    }
}

/// Where Play traffic gets genuine purchases: a Play simulator in process (the demo makes `PlaySimulator` one).
public protocol PlayPurchaseMinting: Sendable {
    func mintPlayTrafficPurchase(
        packageName: String, productID: String, type: ProductType
    ) throws
        -> PlayTrafficPurchase
}

extension TrafficMix {
    /// An assumed Android mix (no field measurement behind it, unlike ``seed000``): patched apps' forged signatures
    /// (`forged`), other apps' purchases (`other_app`), replays of genuine tokens (`repeat`) and genuine purchases.
    /// No `cracker`: a Play job carries a purchase token, not a receipt a cracker makes up.
    public static let android = TrafficMix(shares: [.otherApp: 0.3, .forged: 0.45, .repeated: 0.05, .genuine: 0.2])
}

/// Makes Google Play traffic with purchases a Play simulator mints: genuine purchases of the app (one-time,
/// consumable, subscription; each with its signed purchase data), patched apps' forged signatures (a genuine
/// purchase's data altered after signing), other apps' purchases (a small pool of other packages, reused) and
/// replays of genuine tokens, sent again by their own account or by another one. Categories are ``TrafficCategory``'s
/// (a `cracker` share counts as genuine). Deterministic for a given seed, apart from the simulator's tokens and
/// signatures.
public struct PlayTrafficGenerator {
    /// One product of the app, as the simulator mints it.
    public struct Product: Sendable, Hashable {
        public var id: String
        public var type: ProductType

        public init(id: String, type: ProductType) {
            self.id = id
            self.type = type
        }
    }

    public var packageName: String
    public var products: [Product]
    public var mix: TrafficMix
    /// How many other apps' purchases are minted before they are reused (crackers reuse what they find). Default: 8.
    public var otherAppPoolSize = 8
    private let minter: any PlayPurchaseMinting
    private var random: TrafficRandom
    private var genuine: [(generated: GeneratedJob, purchase: GooglePlayPurchase)] = []
    private var otherAppPool: [GooglePlayPurchase] = []
    private var sequence = 0

    public init(
        minter: any PlayPurchaseMinting, packageName: String, products: [Product], mix: TrafficMix = .android,
        seed: UInt64 = 42
    ) {
        precondition(!products.isEmpty, "the generator needs at least one product")
        self.minter = minter
        self.packageName = packageName
        self.products = products
        self.mix = mix
        self.random = TrafficRandom(seed: seed)
    }

    /// `count` jobs.
    public mutating func generate(count: Int) throws -> [GeneratedJob] {
        var jobs: [GeneratedJob] = []
        jobs.reserveCapacity(count)
        for _ in 0..<count { jobs.append(try next()) }
        return jobs
    }

    /// The next job; a repeat or a forgery before any genuine purchase exists is a genuine purchase.
    public mutating func next() throws -> GeneratedJob {
        sequence += 1
        var category = mix.pick(random.unit())
        if category == .cracker || (category == .repeated || category == .forged) && genuine.isEmpty {
            category = .genuine
        }
        switch category {
        case .genuine, .cracker: return try makeGenuine()
        case .otherApp: return try makeOtherApp()
        case .repeated: return makeRepeat()
        case .forged: return makeForged()
        }
    }

    private mutating func newJob(_ purchase: GooglePlayPurchase, account: String? = nil) -> ReceiptJob {
        ReceiptJob(
            jobID: "gp-\(random.runID)-\(sequence)", accountID: account ?? "gp-\(random.runID)-\(sequence)",
            proof: .googlePlay(purchase), submittedAt: Date())
    }

    private mutating func makeGenuine() throws -> GeneratedJob {
        let product = products[random.below(products.count)]
        let minted = try minter.mintPlayTrafficPurchase(
            packageName: packageName, productID: product.id, type: product.type)
        let purchase = GooglePlayPurchase(
            packageName: packageName, productID: product.id, purchaseToken: minted.purchaseToken,
            purchaseData: minted.purchaseData, signature: minted.signature)
        let generated = GeneratedJob(
            category: .genuine, job: newJob(purchase), transactionID: minted.purchaseToken)
        genuine.append((generated, purchase))
        return generated
    }

    /// Another app's genuine purchase, sent to this deployment under its own package name.
    private mutating func makeOtherApp() throws -> GeneratedJob {
        let purchase: GooglePlayPurchase
        if otherAppPool.count < otherAppPoolSize {
            let package = "com.other\(otherAppPool.count).android"
            let minted = try minter.mintPlayTrafficPurchase(
                packageName: package, productID: "coins", type: .consumable)
            purchase = GooglePlayPurchase(
                packageName: package, productID: "coins", purchaseToken: minted.purchaseToken,
                purchaseData: minted.purchaseData, signature: minted.signature)
            otherAppPool.append(purchase)
        } else {
            purchase = otherAppPool[random.below(otherAppPool.count)]
        }
        return GeneratedJob(category: .otherApp, job: newJob(purchase))
    }

    /// A genuine purchase's token sent again, half the time by its own account, half by another.
    private mutating func makeRepeat() -> GeneratedJob {
        let (original, purchase) = genuine[random.below(genuine.count)]
        let byAnother = random.unit() < 0.5
        let job = newJob(purchase, account: byAnother ? nil : original.job.accountID)
        return GeneratedJob(
            category: .repeated, job: job, transactionID: original.transactionID, isReplayByAnotherAccount: byAnother)
    }

    /// What a patched app sends: a genuine purchase's data edited after signing (one digit of its `purchaseTime`),
    /// under the original signature, so only the signature gives it away.
    private mutating func makeForged() -> GeneratedJob {
        var purchase = genuine[random.below(genuine.count)].purchase
        purchase.purchaseData = purchase.purchaseData.map(Self.forging)
        return GeneratedJob(category: .forged, job: newJob(purchase))
    }

    /// `purchaseData` with the last digit of its `purchaseTime` changed (9 becomes 0, others go up by one); any
    /// other text gets a trailing space, which the signature does not cover either.
    static func forging(_ purchaseData: String) -> String {
        var bytes = Array(purchaseData.utf8)
        guard let key = purchaseData.range(of: "\"purchaseTime\":") else { return purchaseData + " " }
        var index = purchaseData.utf8.distance(from: purchaseData.startIndex, to: key.upperBound)
        while index < bytes.count, bytes[index] == 0x20 { index += 1 }
        var last: Int?
        while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
            last = index
            index += 1
        }
        guard let last else { return purchaseData + " " }
        bytes[last] = bytes[last] == 0x39 ? 0x30 : bytes[last] + 1
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Merges two stores' jobs into one sequence: at each position the next job is taken from `play` with the
    /// share of Play jobs still to place, so both keep their own order (a repeat still follows its original) and
    /// Play jobs are spread over the whole run. Deterministic for a given seed.
    public static func interleave(
        appStore: [GeneratedJob], play: [GeneratedJob], seed: UInt64 = 42
    ) -> [GeneratedJob] {
        var random = SplitMix64(seed: seed ^ 0x504C_4159)
        var (apple, google) = (appStore[...], play[...])
        var merged: [GeneratedJob] = []
        merged.reserveCapacity(appStore.count + play.count)
        while !apple.isEmpty || !google.isEmpty {
            let playShare = Double(google.count) / Double(apple.count + google.count)
            if random.unit() < playShare {
                merged.append(google.removeFirst())
            } else {
                merged.append(apple.removeFirst())
            }
        }
        return merged
    }
}
