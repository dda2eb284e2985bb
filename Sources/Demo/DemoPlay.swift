import Foundation
import Messages
import PlaySimulator
import Traffic

/// The demo's Google Play app: the same package name as the App Store app's bundle id, and products granting the
/// App Store products' entitlements where the two sell the same thing.
extension DemoApp {
    package static let playPackage = bundleID
    package static let playProducts: [Catalog.PlayProduct] = [
        .init(id: "coins_100", type: .consumable),
        .init(id: "premium", type: .nonConsumable, entitlements: ["com.example.verifyworker.premium"]),
        .init(id: "gold", type: .autoRenewable, basePlans: ["monthly"], entitlements: ["gold"]),
    ]
    /// The products as the Play traffic generator mints them.
    package static var playTrafficProducts: [PlayTrafficGenerator.Product] {
        playProducts.map { PlayTrafficGenerator.Product(id: $0.id, type: $0.type) }
    }

    /// The demo's catalog, with the Play app when its key files are given.
    package static func catalog(licensingKeyFile: URL?, serviceAccountKeyFile: URL?) -> Catalog {
        guard let licensingKeyFile, let serviceAccountKeyFile else { return catalog }
        return Catalog(
            bundleIDs: catalog.bundleIDs, products: Array(catalog.products.values),
            playApps: [
                .init(
                    packageName: playPackage, licensingKeyFile: licensingKeyFile.path,
                    serviceAccountKeyFile: serviceAccountKeyFile.path)
            ],
            playProducts: playProducts)
    }
}

extension PlaySimulator: PlayPurchaseMinting {
    public func mintPlayTrafficPurchase(
        packageName: String, productID: String, type: ProductType
    ) throws
        -> PlayTrafficPurchase
    {
        var request = PlayMintRequest(packageName: packageName, productId: productID, type: type)
        if type == .autoRenewable { request.basePlanId = "monthly" }
        let (purchase, signed) = try mint(request)
        return PlayTrafficPurchase(
            purchaseToken: purchase.purchaseToken, purchaseData: signed.purchaseJSON, signature: signed.signature)
    }
}

/// What Google was asked during a demo run, counted by the Play simulator, and whether every granted purchase was
/// acknowledged (or consumed) by the end.
package struct DemoPlayCalls: Sendable, Equatable {
    /// Distinct purchase tokens of genuine Play jobs.
    package var genuinePurchases = 0
    /// Purchase reads (`subscriptionsv2.get`, `productsv2.getproductpurchasev2`) of those purchases.
    package var genuineReads = 0
    /// Acknowledge and consume calls on those purchases.
    package var genuineFollowUps = 0
    /// Every other Developer API call: calls made for junk.
    package var otherCalls = 0
    /// OAuth token requests (one per service account and hour, not per purchase).
    package var tokenRequests = 0
    /// Play jobs granted (first verdict), and how many of their purchases were acknowledged or consumed.
    package var granted = 0
    package var followedUp = 0

    package init() {}

    /// Calls per genuine purchase: reads and follow-ups.
    package var readsPerGenuine: Double {
        genuinePurchases == 0 ? 0 : Double(genuineReads) / Double(genuinePurchases)
    }
    package var followUpsPerGenuine: Double {
        genuinePurchases == 0 ? 0 : Double(genuineFollowUps) / Double(genuinePurchases)
    }

    /// Counts the calls the simulator saw for `entries`' Play jobs.
    package static func count(_ entries: [DemoReport.Entry], simulator: PlaySimulator) -> DemoPlayCalls {
        var calls = DemoPlayCalls()
        let genuine = Set(
            entries.filter { $0.generated.category == .genuine }.compactMap { DemoReport.playToken(of: $0.generated) })
        calls.genuinePurchases = genuine.count
        for token in genuine {
            guard let purchase = simulator.purchase(token) else { continue }
            calls.genuineReads += purchase.reads
            calls.genuineFollowUps += purchase.acknowledgeCalls + purchase.consumeCalls
        }
        let requests = simulator.stats.snapshot().requests
        let apiCalls = PlayRoute.allCases.filter { $0 != .token }.map { requests[$0.rawValue, default: 0] }.reduce(0, +)
        calls.otherCalls = max(0, apiCalls - calls.genuineReads - calls.genuineFollowUps)
        calls.tokenRequests = requests[PlayRoute.token.rawValue, default: 0]
        let granted = grantedTokens(entries)
        calls.granted = granted.count
        calls.followedUp = granted.filter { isFollowedUp($0, simulator: simulator) }.count
        return calls
    }

    /// Tokens of Play jobs whose first verdict is a grant.
    package static func grantedTokens(_ entries: [DemoReport.Entry]) -> [String] {
        entries.compactMap { entry in
            guard entry.verdicts.first?.outcome == .granted else { return nil }
            return DemoReport.playToken(of: entry.generated)
        }
    }

    /// Whether Google has the purchase acknowledged (a consumable: consumed, which acknowledges it too).
    package static func isFollowedUp(_ token: String, simulator: PlaySimulator) -> Bool {
        guard let purchase = simulator.purchase(token) else { return false }
        return purchase.acknowledgedAt != nil || purchase.consumedAt != nil
    }

    /// Waits until every granted Play purchase is acknowledged or consumed: the workers do it in the background after
    /// the grant is durable, so the verdict comes first. Checks the simulator's records every 20 ms, for at most
    /// `limit`; returns whether all were.
    package static func awaitFollowUps(
        _ entries: [DemoReport.Entry], simulator: PlaySimulator, limit: Duration
    ) async throws -> Bool {
        var pending = grantedTokens(entries)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: limit)
        while true {
            pending.removeAll { isFollowedUp($0, simulator: simulator) }
            if pending.isEmpty { return true }
            if clock.now >= deadline { return false }
            try await clock.sleep(for: .milliseconds(20))
        }
    }
}
