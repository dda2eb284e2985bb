import Foundation
import Messages
import Traffic

/// The Google Play app a chaos run verifies for, beside ``ChaosApp``.
public enum ChaosPlayApp {
    public static let packageName = "com.example.verifyworker.android"
    /// Another developer's app: its purchases are genuine, but not this deployment's.
    public static let otherPackageName = "com.example.otherapp"
    public static let basePlan = "monthly"
    /// The period of the run's subscriptions: shorter than the reconciler's largest re-read lead (a day), so every
    /// Play subscription is re-read during the run.
    public static let subscriptionPeriod = 43_200
    /// The Play simulator's push subscription, its OIDC tokens' audience and service account, as the gateway
    /// expects them.
    public static let pushSubscription = "projects/play-simulator/subscriptions/play-rtdn"
    public static let pushAudience = "https://verify-worker.chaos.invalid/google-play/notifications"
    public static let pushServiceAccount = "rtdn-push@play-simulator.iam.gserviceaccount.com"

    /// The Play products, under the App Store products' ids (docs/CONFIGURATION.md: an id may be listed in both
    /// stores): one product sold in both stores grants one entitlement, whichever store the entitlement service
    /// looks it up in.
    public static let products: [Catalog.PlayProduct] = [
        .init(id: ChaosApp.consumable, type: .consumable), .init(id: ChaosApp.nonConsumable, type: .nonConsumable),
        .init(id: ChaosApp.subscription, type: .autoRenewable, basePlans: [basePlan]),
    ]

    /// ``ChaosApp/catalog`` with the Play app (its two key files) and its products.
    public static func catalog(licensingKeyFile: URL, serviceAccountKeyFile: URL) -> Catalog {
        let apple = ChaosApp.catalog
        return Catalog(
            bundleIDs: apple.bundleIDs, products: apple.products.values.sorted { $0.id < $1.id },
            playApps: [
                .init(
                    packageName: packageName, licensingKeyFile: licensingKeyFile.path,
                    serviceAccountKeyFile: serviceAccountKeyFile.path)
            ],
            playProducts: products)
    }
}

/// One purchase the Play simulator minted for a run.
public struct ChaosPlayPurchase: Sendable, Hashable {
    public var token: String
    public var packageName: String
    public var productID: String
    public var type: ProductType
    /// The order id (at minting also a subscription's latest successful order id: the transaction id of its grant).
    public var orderID: String?
    public var purchaseJSON: String
    public var signature: String

    public init(
        token: String, packageName: String, productID: String, type: ProductType, orderID: String?,
        purchaseJSON: String = "", signature: String = ""
    ) {
        self.token = token
        self.packageName = packageName
        self.productID = productID
        self.type = type
        self.orderID = orderID
        self.purchaseJSON = purchaseJSON
        self.signature = signature
    }

    /// What Google Play identifies the purchase by: a subscription by its token (renewals keep it), a one-time
    /// purchase by its order id.
    public var key: String { type == .autoRenewable ? token : (orderID ?? token) }

    /// How violations name it: the order id, never the whole token (a bearer proof of the purchase).
    public var label: String { orderID ?? "token \(token.prefix(12))…" }

    /// The proof a client sends, signed when `signed`.
    func proof(signed: Bool = true) -> GooglePlayPurchase {
        GooglePlayPurchase(
            packageName: packageName, productID: productID, purchaseToken: token,
            purchaseData: signed ? purchaseJSON : nil, signature: signed ? signature : nil)
    }
}

/// What the Play simulator knows of a purchase at the end (`GET /sim/purchases/{token}`), reduced to what the
/// invariants compare.
public struct ChaosPlayPurchaseTruth: Sendable, Hashable {
    public var state: String
    public var acknowledgeCalls = 0
    public var consumeCalls = 0
    public var refundedAtMs: Int64?
}

/// In an extension, so that the memberwise initializer stays.
extension ChaosPlayPurchaseTruth {
    init?(json object: [String: Any]) {
        guard let state = object["state"] as? String else { return nil }
        self.state = state
        acknowledgeCalls = (object["acknowledge_calls"] as? NSNumber)?.intValue ?? 0
        consumeCalls = (object["consume_calls"] as? NSNumber)?.intValue ?? 0
        refundedAtMs = (object["refunded_at_ms"] as? NSNumber)?.int64Value
    }
}

/// The Google Play figures of a run (the summary's `play`).
public struct ChaosPlayReport: Sendable, Codable, Hashable {
    /// Play jobs submitted, decided (at least one verdict), and lost (none).
    public var jobs = 0
    public var jobsDecided = 0
    public var lost = 0
    /// Decided Play jobs per outcome.
    public var outcomes: [String: Int] = [:]
    /// Purchases minted for the run (of this app and another's).
    public var purchasesMinted = 0
    /// Purchases granted (by Google Play's identity: order id, or a subscription's token).
    public var purchasesGranted = 0
    /// Granted purchases acknowledged exactly once, and granted consumables consumed exactly once.
    public var acknowledgedOnce = 0
    public var consumedOnce = 0
    /// Requests the Play simulator counted per route, and the faults it injected by kind.
    public var requests: [String: Int] = [:]
    public var faultsInjected: [String: Int] = [:]

    public init() {}
}

/// Google Play's invariants, as one pure function of what the run minted and submitted, the verdicts and the Play
/// simulator's truth at the end: every Play job decided; no purchase granted to two accounts or by two jobs (by
/// Google Play's identity: a subscription's token, a one-time purchase's order id); every granted purchase
/// acknowledged exactly once (a consumable consumed exactly once) and every other one never; none refunded by
/// Google's three days. Jobs without a verdict and junk granted are also the general check's
/// (``ChaosInvariantChecker``), which reports them.
public struct ChaosPlayChecker: Sendable {
    /// The Play jobs submitted.
    public var jobs: [ChaosSubmittedJob]
    /// Every purchase minted for the run.
    public var purchases: [ChaosPlayPurchase]
    /// Purchase tokens the Play lifecycle gave events: a refund there is the lifecycle's, not Google's three days.
    public var lifecycleTokens: Set<String> = []

    /// The purchase tokens granted by these verdicts (the first verdict of each Play job).
    public func grantedTokens(_ verdicts: [Verdict]) -> Set<String> {
        Set(grants(verdicts).map(\.purchase.token))
    }

    private func grants(_ verdicts: [Verdict]) -> [(purchase: ChaosPlayPurchase, verdict: Verdict)] {
        let byToken = Dictionary(purchases.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        let byOrder = Dictionary(
            purchases.compactMap { purchase in purchase.orderID.map { ($0, purchase) } },
            uniquingKeysWith: { first, _ in first })
        let jobIDs = Set(jobs.map(\.jobID))
        var first: [String: Verdict] = [:]
        for verdict in verdicts where jobIDs.contains(verdict.jobID) && first[verdict.jobID] == nil {
            first[verdict.jobID] = verdict
        }
        var grants: [(ChaosPlayPurchase, Verdict)] = []
        for (_, verdict) in first.sorted(by: { $0.key < $1.key }) where verdict.outcome == .granted {
            for transaction in verdict.transactions {
                let purchase =
                    transaction.purchaseToken.flatMap { byToken[$0] } ?? byOrder[transaction.transactionID]
                    ?? ChaosPlayPurchase(
                        token: transaction.purchaseToken ?? transaction.transactionID, packageName: "?",
                        productID: transaction.productID, type: .nonConsumable, orderID: transaction.transactionID)
                grants.append((purchase, verdict))
            }
        }
        return grants
    }

    /// The violations and the figures (``ChaosPlayReport/requests`` and ``ChaosPlayReport/faultsInjected`` are the
    /// caller's). `truths` holds the simulator's answer per purchase token (absent: it had none).
    public func check(
        verdicts: [Verdict], truths: [String: ChaosPlayPurchaseTruth]
    ) -> (violations: [ChaosViolation], report: ChaosPlayReport) {
        var violations: [ChaosViolation] = []
        var report = ChaosPlayReport()
        report.jobs = Set(jobs.map(\.jobID)).count
        report.purchasesMinted = purchases.count
        var decided: [String: Verdict] = [:]
        let jobIDs = Set(jobs.map(\.jobID))
        for verdict in verdicts where jobIDs.contains(verdict.jobID) && decided[verdict.jobID] == nil {
            decided[verdict.jobID] = verdict
        }
        report.jobsDecided = decided.count
        report.lost = report.jobs - decided.count
        for verdict in decided.values { report.outcomes[verdict.outcome.rawValue, default: 0] += 1 }

        // One account and one job per purchase, by Google Play's identity.
        var accounts: [String: Set<String>] = [:]
        var grantingJobs: [String: Set<String>] = [:]
        var labels: [String: String] = [:]
        var granted: [String: ChaosPlayPurchase] = [:]
        for (purchase, verdict) in grants(verdicts) {
            accounts[purchase.key, default: []].insert(verdict.accountID)
            grantingJobs[purchase.key, default: []].insert(verdict.jobID)
            labels[purchase.key] = purchase.label
            granted[purchase.token] = purchase
        }
        report.purchasesGranted = accounts.count
        for (key, owners) in accounts.sorted(by: { $0.key < $1.key }) {
            let jobs = grantingJobs[key] ?? []
            if owners.count > 1 {
                violations.append(
                    .playGrantedTwice(
                        purchase: labels[key] ?? key, detail: "to \(owners.count) accounts: \(owners.sorted())"))
            } else if jobs.count > 1 {
                violations.append(
                    .playGrantedTwice(purchase: labels[key] ?? key, detail: "by \(jobs.count) jobs: \(jobs.sorted())"))
            }
        }

        // Acknowledged (or consumed) exactly once when granted, never otherwise; never refunded.
        var minted = Dictionary(purchases.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        minted.merge(granted) { known, _ in known }
        for (token, purchase) in minted.sorted(by: { $0.key < $1.key }) {
            let isGranted = granted[token] != nil
            guard let truth = truths[token] else {
                if isGranted {
                    violations.append(
                        .playAcknowledgements(purchase: purchase.label, detail: "granted, but unknown to Google Play"))
                }
                continue
            }
            if truth.refundedAtMs != nil || (truth.state == "refunded" && !lifecycleTokens.contains(token)) {
                violations.append(.playRefunded(purchase: purchase.label, state: truth.state))
            }
            let calls = "acknowledge \(truth.acknowledgeCalls), consume \(truth.consumeCalls)"
            if !isGranted {
                if truth.acknowledgeCalls + truth.consumeCalls > 0 {
                    violations.append(
                        .playAcknowledgements(purchase: purchase.label, detail: "never granted, \(calls)"))
                }
            } else if purchase.type == .consumable {
                if truth.consumeCalls == 1, truth.acknowledgeCalls == 0 {
                    report.consumedOnce += 1
                } else {
                    violations.append(
                        .playAcknowledgements(
                            purchase: purchase.label, detail: "a granted consumable: \(calls) (one consume expected)"))
                }
            } else if truth.acknowledgeCalls == 1, truth.consumeCalls == 0 {
                report.acknowledgedOnce += 1
            } else {
                violations.append(
                    .playAcknowledgements(
                        purchase: purchase.label, detail: "granted: \(calls) (one acknowledge expected)"))
            }
        }
        return (violations, report)
    }
}

/// The Play simulator process of a run, through its HTTP API (docs/PLAY-SIMULATOR.md).
struct ChaosPlaySimulator: Sendable {
    let base: String

    /// Mints a purchase; throws when the simulator refuses or does not answer.
    func mint(
        packageName: String, productID: String, type: ProductType, quantity: Int = 1, pending: Bool = false
    ) async throws -> ChaosPlayPurchase {
        var body: [String: Any] = [
            "package_name": packageName, "product_id": productID, "type": type.rawValue, "quantity": quantity,
        ]
        if pending { body["pending"] = true }
        if type == .autoRenewable {
            body["base_plan_id"] = ChaosPlayApp.basePlan
            body["period_s"] = ChaosPlayApp.subscriptionPeriod
        }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        guard let answer = await ChaosHTTP.postForAnswer("\(base)/sim/mint", json: json), answer.status == 200,
            let token = answer.object["purchase_token"] as? String,
            let purchaseJSON = answer.object["purchase_json"] as? String,
            let signature = answer.object["signature"] as? String
        else { throw ChaosError("play-sim: POST /sim/mint failed for \(productID)") }
        return ChaosPlayPurchase(
            token: token, packageName: packageName, productID: productID, type: type,
            orderID: answer.object["order_id"] as? String, purchaseJSON: purchaseJSON, signature: signature)
    }

    /// The package's licensing key as the Play Console shows it.
    func licensingKey(packageName: String) async throws -> String {
        guard let data = await ChaosHTTP.get("\(base)/sim/apps/\(packageName)/licensing-key"),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let key = object["licensing_key"] as? String
        else { throw ChaosError("play-sim: no licensing key for \(packageName)") }
        return key
    }

    /// What the simulator knows of a purchase, or nil when it answers nothing readable.
    func truth(token: String) async -> ChaosPlayPurchaseTruth? {
        guard let data = await ChaosHTTP.get("\(base)/sim/purchases/\(token)"),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return ChaosPlayPurchaseTruth(json: object)
    }

    /// The truths of many purchases, a few requests at a time.
    func truths(tokens: [String]) async -> [String: ChaosPlayPurchaseTruth] {
        await withTaskGroup(of: (String, ChaosPlayPurchaseTruth?).self) { group in
            var result: [String: ChaosPlayPurchaseTruth] = [:]
            var pending = tokens.makeIterator()
            func addNext(_ group: inout TaskGroup<(String, ChaosPlayPurchaseTruth?)>) {
                guard let token = pending.next() else { return }
                group.addTask { (token, await truth(token: token)) }
            }
            for _ in 0..<8 { addNext(&group) }
            while let (token, truth) = await group.next() {
                if let truth { result[token] = truth }
                addNext(&group)
            }
            return result
        }
    }

    /// Requests per route and faults injected per kind (`GET /sim/stats`).
    func stats() async -> (requests: [String: Int], faults: [String: Int]) {
        guard let data = await ChaosHTTP.get("\(base)/sim/stats"),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return ([:], [:]) }
        func counts(_ key: String) -> [String: Int] {
            ((object[key] as? [String: Any]) ?? [:]).compactMapValues { ($0 as? NSNumber)?.intValue }
        }
        return (counts("requests"), counts("faults"))
    }

    /// Installs a fault plan (`{}` clears it); false when the simulator refused it.
    @discardableResult
    func setFaults(_ json: String) async -> Bool { await ChaosHTTP.post("\(base)/sim/faults", json: json) }

    /// The fault plan of a Play storm held for `seconds` (the plan's own duration bounds it too, should the clearing
    /// call be lost).
    static func faultPlan(_ fault: ChaosEnvironment.Fault, seconds: Int) -> String? {
        let rules: String
        switch fault {
        case .play429:
            // Every API call throttled, with a Retry-After the workers must honour.
            rules = #"[{"route": "api", "fault": "http_429", "retry_after_s": 2}]"#
        case .play5xx:
            rules = #"[{"route": "api", "fault": "http_503", "ratio": 0.5}, {"route": "api", "fault": "http_500"}]"#
        case .playTokenEndpointDown:
            // Access tokens live an hour: some expire now, so workers must go to the token endpoint while it is down.
            rules =
                #"[{"route": "api", "fault": "expired_token", "count": 6}, {"route": "token", "fault": "token_endpoint_down"}]"#
        default:
            return nil
        }
        return #"{"rules": \#(rules), "duration_s": \#(seconds + 5)}"#
    }
}

/// Mints a run's Google Play traffic in the Play simulator and adds it to the run's traffic: genuine one-time,
/// consumable and subscription purchases, repeats by the same account, replays by other accounts (one at a time and
/// three at once), forged signatures, other apps' purchases and tokens, and tokens Google never issued.
struct ChaosPlayTrafficBuilder {
    let simulator: ChaosPlaySimulator
    let runID: String

    /// Jobs one block of the mix submits (``add(block:purchases:to:)``).
    static let jobsPerBlock = 13

    /// Adds about `jobs` Play jobs to `traffic` (whole blocks, at least one); returns every purchase minted.
    func build(jobs: Int, into traffic: inout ChaosTraffic) async throws -> [ChaosPlayPurchase] {
        let blocks = max(1, jobs / Self.jobsPerBlock)
        let own = ChaosPlayApp.packageName
        let other = ChaosPlayApp.otherPackageName
        // Per block, in order: a non-consumable, a consumable, a subscription, a non-consumable and a subscription
        // to be replayed, a non-consumable whose signature is forged, and two purchases of another app.
        let plan: [(String, String, ProductType)] = [
            (own, ChaosApp.nonConsumable, .nonConsumable), (own, ChaosApp.consumable, .consumable),
            (own, ChaosApp.subscription, .autoRenewable), (own, ChaosApp.nonConsumable, .nonConsumable),
            (own, ChaosApp.subscription, .autoRenewable), (own, ChaosApp.nonConsumable, .nonConsumable),
            (other, "other.premium", .nonConsumable), (other, "other.premium", .nonConsumable),
        ]
        let simulator = simulator
        let minted = try await withThrowingTaskGroup(of: (Int, ChaosPlayPurchase).self) { group in
            var result = [ChaosPlayPurchase?](repeating: nil, count: blocks * plan.count)
            var next = 0
            func addNext(_ group: inout ThrowingTaskGroup<(Int, ChaosPlayPurchase), any Error>) {
                guard next < result.count else { return }
                let index = next
                next += 1
                let (package, product, type) = plan[index % plan.count]
                let quantity = type == .consumable ? 1 + (index / plan.count) % 3 : 1
                group.addTask {
                    (
                        index,
                        try await simulator.mint(
                            packageName: package, productID: product, type: type, quantity: quantity)
                    )
                }
            }
            for _ in 0..<8 { addNext(&group) }
            while let (index, purchase) = try await group.next() {
                result[index] = purchase
                addNext(&group)
            }
            return result.compactMap { $0 }
        }
        for block in 0..<blocks {
            add(block: block, purchases: Array(minted[(block * plan.count)..<((block + 1) * plan.count)]), to: &traffic)
        }
        return minted
    }

    /// One block of the mix: ``jobsPerBlock`` jobs (and one repeated message) on `purchases` (minted by ``build``'s
    /// plan).
    func add(block: Int, purchases: [ChaosPlayPurchase], to traffic: inout ChaosTraffic) {
        var sequence = 0
        func job(_ proof: GooglePlayPurchase, account: String) -> ReceiptJob {
            sequence += 1
            return ReceiptJob(
                jobID: "\(runID)-play-\(block)-\(sequence)", accountID: account, proof: .googlePlay(proof),
                submittedAt: Date())
        }
        func account(_ name: String) -> String { "\(runID)-play-\(block)-\(name)" }
        let (oneTime, consumable, subscription) = (purchases[0], purchases[1], purchases[2])
        let (replayedOnce, contested, forged) = (purchases[3], purchases[4], purchases[5])
        let (otherApp, otherToken) = (purchases[6], purchases[7])

        traffic.add(
            job(oneTime.proof(), account: account("a")), grantable: oneTime.orderID, category: "play_one_time")
        // A consumable, and the same job again (a frontend retry): identical verdicts.
        traffic.burst { traffic in
            traffic.add(
                job(consumable.proof(), account: account("b")), grantable: consumable.orderID,
                category: "play_consumable")
            traffic.repeatLast(category: "play_same_job_twice")
        }
        // A subscription (without the signed data, as a server may forward only the token), then the same account
        // again under a new job id: already granted.
        traffic.burst { traffic in
            traffic.add(
                job(subscription.proof(signed: false), account: account("c")), grantable: subscription.orderID,
                category: "play_subscription")
            traffic.add(
                job(subscription.proof(signed: false), account: account("c")), grantable: subscription.orderID,
                category: "play_replay_same_account")
        }
        // A purchase and another account's replay of it, racing: exactly one account gets it.
        traffic.burst { traffic in
            traffic.add(
                job(replayedOnce.proof(), account: account("d")), grantable: replayedOnce.orderID,
                category: "play_one_time")
            traffic.add(
                job(replayedOnce.proof(), account: account("e")), grantable: replayedOnce.orderID,
                category: "play_replay_other_account")
        }
        // A subscription submitted at once by three accounts.
        traffic.burst { traffic in
            for name in ["f", "g", "h"] {
                traffic.add(
                    job(contested.proof(), account: account(name)), grantable: contested.orderID,
                    category: "play_concurrent_cross_account")
            }
        }
        // Forged: the purchase data's signature is not the licensing key's.
        var forgedProof = forged.proof()
        forgedProof.signature = Self.forge(signature: forged.signature)
        traffic.add(job(forgedProof, account: account("i")), grantable: nil, category: "play_forged_signature")
        // Another app's purchase, and another app's token presented as this app's.
        traffic.add(job(otherApp.proof(), account: account("j")), grantable: nil, category: "play_other_app")
        var borrowed = otherToken.proof(signed: false)
        borrowed.packageName = ChaosPlayApp.packageName
        borrowed.productID = ChaosApp.nonConsumable
        traffic.add(job(borrowed, account: account("k")), grantable: nil, category: "play_other_app_token")
        // A token Google never issued.
        var invented = oneTime.proof(signed: false)
        invented.purchaseToken = String(oneTime.token.reversed())
        traffic.add(job(invented, account: account("l")), grantable: nil, category: "play_unknown_token")
    }

    /// A signature of the right shape that the licensing key did not make: one byte of the real one changed.
    static func forge(signature: String) -> String {
        guard var bytes = Data(base64Encoded: signature), !bytes.isEmpty else { return "AAAA" }
        bytes[bytes.startIndex + bytes.count / 2] ^= 0x5A
        return bytes.base64EncodedString()
    }
}
