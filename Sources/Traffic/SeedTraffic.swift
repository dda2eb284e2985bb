import AppleSimulator
import CodedErrors
import Foundation
import Messages
import RateLimiter
import Receipts

/// The kinds of traffic a purchase-verification endpoint receives, after seed 000's measurements.
public enum TrafficCategory: String, CaseIterable, Sendable, Codable {
    /// Authentic receipts of other apps (79%).
    case otherApp = "other_app"
    /// Cracker-made receipts: base64 of a bare product id (9.3%).
    case cracker
    /// A genuine receipt sent again, by its owner or by another account (1%).
    case repeated = "repeat"
    /// Well-formed receipts with a broken signature: edited after signing (0.7%).
    case forged
    /// New, authentic purchases of this app (10%).
    case genuine
}

/// The share of each category in generated traffic. Default: seed 000's mix.
public struct TrafficMix: Sendable, Hashable, CustomStringConvertible {
    public var shares: [TrafficCategory: Double]

    public static let seed000 = TrafficMix(shares: [
        .otherApp: 0.79, .cracker: 0.093, .repeated: 0.01, .forged: 0.007, .genuine: 0.10,
    ])

    public init(shares: [TrafficCategory: Double]) { self.shares = shares }

    /// Parses `other_app=0.79,cracker=0.093,…`; missing categories get 0; shares are normalized.
    public init?(parsing text: String) {
        var shares: [TrafficCategory: Double] = [:]
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let category = TrafficCategory(rawValue: parts[0]), let share = Double(parts[1]),
                share >= 0
            else { return nil }
            shares[category] = share
        }
        guard shares.values.reduce(0, +) > 0 else { return nil }
        self.shares = shares
    }

    public var description: String {
        TrafficCategory.allCases.map { "\($0.rawValue)=\(shares[$0] ?? 0)" }.joined(separator: ",")
    }

    func pick(_ unit: Double) -> TrafficCategory {
        let total = shares.values.reduce(0, +)
        var cumulative = 0.0
        for category in TrafficCategory.allCases {
            cumulative += (shares[category] ?? 0) / total
            if unit < cumulative { return category }
        }
        return .genuine
    }
}

/// One generated job and what it is known to be, so a run can check each verdict against its category.
public struct GeneratedJob: Sendable {
    public var category: TrafficCategory
    public var job: ReceiptJob
    public var format: SimulatedReceiptFormat?
    public var environment: AppleEnvironment?
    /// The transaction a genuine or repeated job carries.
    public var transactionID: String?
    /// For a repeat: whether the same account sends it again (idempotent) or another one (a replay).
    public var isReplayByAnotherAccount: Bool

    public init(
        category: TrafficCategory, job: ReceiptJob, format: SimulatedReceiptFormat? = nil,
        environment: AppleEnvironment? = nil, transactionID: String? = nil, isReplayByAnotherAccount: Bool = false
    ) {
        self.category = category
        self.job = job
        self.format = format
        self.environment = environment
        self.transactionID = transactionID
        self.isReplayByAnotherAccount = isReplayByAnotherAccount
    }
}

/// A receipt minted for generated traffic: what the generator needs of `POST /sim/mint`'s answer.
public struct TrafficReceipt: Sendable, Hashable {
    /// Base64 for app and transaction receipts, the compact JWS for signed transactions.
    public var receipt: String
    public var transactionID: String
}

/// Where generated traffic gets genuine receipts: the in-process ``AppleSimulator`` or a simulator reached over
/// HTTP (``RemoteSimulatorMinter``).
public protocol ReceiptMinting: Sendable {
    func mintTrafficReceipt(_ request: MintRequest) async throws -> TrafficReceipt
}

extension AppleSimulator: ReceiptMinting {
    public func mintTrafficReceipt(_ request: MintRequest) async throws -> TrafficReceipt {
        let minted = try mint(request)
        return TrafficReceipt(receipt: minted.receipt, transactionID: minted.transaction.transactionId)
    }
}

/// Mints at a running simulator with `POST /sim/mint` (docs/APPLE-SIMULATOR.md). The HTTP exchange is the
/// caller's (`post` sends a JSON body to a URL and returns the status and body), so this target needs no HTTP
/// client of its own.
public struct RemoteSimulatorMinter: ReceiptMinting {
    public typealias Post = @Sendable (_ url: String, _ body: [UInt8]) async throws -> (status: Int, body: [UInt8])

    /// The simulator's base URL, e.g. `http://apple-sim:8443`.
    public var baseURL: String
    private let post: Post

    public init(baseURL: String, post: @escaping Post) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.post = post
    }

    public func mintTrafficReceipt(_ request: MintRequest) async throws -> TrafficReceipt {
        var object: [String: Any] = [
            "bundle_id": request.bundleId, "product_id": request.productId, "format": request.format.rawValue,
            "environment": request.environment.rawValue, "quantity": request.quantity,
        ]
        if let expires = request.expiresDateMs { object["expires_at"] = expires }
        if let original = request.originalTransactionId { object["original_transaction_id"] = original }
        if let purchase = request.purchaseDateMs { object["purchase_date"] = purchase }
        if let type = request.productType { object["type"] = type }
        let body = try JSONSerialization.data(withJSONObject: object)
        let (status, answer) = try await post(baseURL + "/sim/mint", Array(body))
        guard status == 200 else {
            throw AppleSimulatorError(.server, "POST \(baseURL)/sim/mint answered HTTP \(status)")
        }
        guard let json = (try? JSONSerialization.jsonObject(with: Data(answer))) as? [String: Any],
            let receipt = json["receipt"] as? String, let transactionID = json["transaction_id"] as? String
        else {
            throw AppleSimulatorError(.server, "POST \(baseURL)/sim/mint: the answer lacks receipt or transaction_id")
        }
        return TrafficReceipt(receipt: receipt, transactionID: transactionID)
    }
}

/// Makes traffic shaped like seed 000 with receipts the simulator mints: genuine purchases of the app, authentic
/// receipts of other apps (a small pool, reused as crackers reuse them), cracker receipts, repeats of earlier
/// genuine jobs and forgeries made by editing a genuine receipt after signing. Deterministic for a given seed,
/// apart from the simulator's own ids and signatures.
///
/// With the in-process simulator, `next()` mints synchronously; with any ``ReceiptMinting`` (a simulator over
/// HTTP), `nextJob()` awaits the mint. Both draw the same sequence for the same seed.
public struct SeedTrafficGenerator {
    public var bundleID: String
    public var productIDs: [String]
    public var mix: TrafficMix
    /// Share of genuine purchases minted in the sandbox (App Review and TestFlight buy there).
    public var sandboxShare: Double
    private var random: TrafficRandom
    /// Set when minting can be done synchronously, in process.
    private let simulator: AppleSimulator?
    private let minter: any ReceiptMinting
    private var genuine: [GeneratedJob] = []
    private var otherAppPool: [(receipt: String, format: SimulatedReceiptFormat)] = []
    private var sequence = 0

    public init(
        simulator: AppleSimulator, bundleID: String, productIDs: [String], mix: TrafficMix = .seed000,
        sandboxShare: Double = 0.2, seed: UInt64 = 42
    ) {
        self.init(
            minter: simulator, bundleID: bundleID, productIDs: productIDs, mix: mix, sandboxShare: sandboxShare,
            seed: seed)
    }

    /// A generator that mints through `minter` (call ``nextJob()``; ``next()`` works only with an in-process
    /// simulator).
    public init(
        minter: any ReceiptMinting, bundleID: String, productIDs: [String], mix: TrafficMix = .seed000,
        sandboxShare: Double = 0.2, seed: UInt64 = 42
    ) {
        precondition(!productIDs.isEmpty, "the generator needs at least one product")
        self.minter = minter
        self.simulator = minter as? AppleSimulator
        self.bundleID = bundleID
        self.productIDs = productIDs
        self.mix = mix
        self.sandboxShare = sandboxShare
        self.random = TrafficRandom(seed: seed)
    }

    /// What the next job needs before it can be made.
    private enum Step {
        case ready(GeneratedJob)
        case needsMint(MintRequest, PendingMint)
    }

    /// A job waiting for its receipt.
    private enum PendingMint {
        case genuine(SimulatedReceiptFormat, AppleEnvironment)
        case otherAppPool(SimulatedReceiptFormat)
    }

    /// The next job, minting in process. Throws if the generator was made with a remote minter (use
    /// ``nextJob()``).
    public mutating func next() throws -> GeneratedJob {
        switch step() {
        case .ready(let job):
            return job
        case .needsMint(let request, let pending):
            guard let simulator else {
                throw AppleSimulatorError(.server, "this generator mints remotely: call nextJob()")
            }
            let minted = try simulator.mint(request)
            return finish(
                pending, TrafficReceipt(receipt: minted.receipt, transactionID: minted.transaction.transactionId))
        }
    }

    /// The next job, minting through the generator's ``ReceiptMinting``.
    public mutating func nextJob() async throws -> GeneratedJob {
        switch step() {
        case .ready(let job):
            return job
        case .needsMint(let request, let pending):
            return finish(pending, try await minter.mintTrafficReceipt(request))
        }
    }

    private mutating func step() -> Step {
        sequence += 1
        var category = mix.pick(random.unit())
        if category == .repeated, genuine.isEmpty { category = .genuine }
        if category == .forged, genuine.isEmpty { category = .genuine }
        switch category {
        case .genuine: return planGenuine()
        case .otherApp: return planOtherApp()
        case .cracker: return .ready(makeCracker())
        case .repeated: return .ready(makeRepeat())
        case .forged: return .ready(makeForged())
        }
    }

    private mutating func finish(_ pending: PendingMint, _ minted: TrafficReceipt) -> GeneratedJob {
        switch pending {
        case .genuine(let format, let environment):
            let generated = GeneratedJob(
                category: .genuine, job: newJob(Self.proof(minted.receipt, format: format)), format: format,
                environment: environment, transactionID: minted.transactionID, isReplayByAnotherAccount: false)
            genuine.append(generated)
            return generated
        case .otherAppPool(let format):
            otherAppPool.append((minted.receipt, format))
            return pickOtherApp()
        }
    }

    /// `count` jobs.
    public mutating func generate(count: Int) throws -> [GeneratedJob] {
        var jobs: [GeneratedJob] = []
        jobs.reserveCapacity(count)
        for _ in 0..<count { jobs.append(try next()) }
        return jobs
    }

    private mutating func newJob(_ proof: ReceiptJob.Proof, account: String? = nil) -> ReceiptJob {
        ReceiptJob(
            jobID: "\(random.runID)-\(sequence)", accountID: account ?? "acct-\(random.runID)-\(sequence)",
            proof: proof,
            bundleID: bundleID, submittedAt: Date())
    }

    private static func proof(_ receipt: String, format: SimulatedReceiptFormat) -> ReceiptJob.Proof {
        format == .signedTransaction ? .signedTransaction(receipt) : .receipt(receipt)
    }

    private mutating func pickFormat() -> SimulatedReceiptFormat {
        SimulatedReceiptFormat.allCases[random.below(SimulatedReceiptFormat.allCases.count)]
    }

    private mutating func planGenuine() -> Step {
        let format = pickFormat()
        let environment: AppleEnvironment = random.unit() < sandboxShare ? .sandbox : .production
        let product = productIDs[random.below(productIDs.count)]
        return .needsMint(
            MintRequest(bundleId: bundleID, productId: product, format: format, environment: environment),
            .genuine(format, environment))
    }

    private mutating func planOtherApp() -> Step {
        if otherAppPool.count < 24 {
            let format = pickFormat()
            let app = "com.other\(otherAppPool.count).game"
            return .needsMint(
                MintRequest(bundleId: app, productId: app + ".coins", format: format, environment: .production),
                .otherAppPool(format))
        }
        return .ready(pickOtherApp())
    }

    private mutating func pickOtherApp() -> GeneratedJob {
        let (receipt, format) = otherAppPool[random.below(otherAppPool.count)]
        return GeneratedJob(
            category: .otherApp, job: newJob(Self.proof(receipt, format: format)), format: format, environment: nil,
            transactionID: nil, isReplayByAnotherAccount: false)
    }

    private mutating func makeCracker() -> GeneratedJob {
        // What iAP Cracker sends: the base64 of a bare product id (seed 000).
        let product = random.unit() < 0.5 ? "com.urus.iap.\(random.below(100_000_000))" : productIDs[0]
        return GeneratedJob(
            category: .cracker, job: newJob(.receipt(Data(product.utf8).base64EncodedString())), format: nil,
            environment: nil, transactionID: nil, isReplayByAnotherAccount: false)
    }

    private mutating func makeRepeat() -> GeneratedJob {
        let original = genuine[random.below(genuine.count)]
        let byAnother = random.unit() < 0.5
        var job = newJob(original.job.proof, account: byAnother ? nil : original.job.accountID)
        job.deviceID = original.job.deviceID
        return GeneratedJob(
            category: .repeated, job: job, format: original.format, environment: original.environment,
            transactionID: original.transactionID, isReplayByAnotherAccount: byAnother)
    }

    /// Edits a genuine receipt after signing, keeping it well-formed: one digit of the transaction id changes
    /// inside the signed content (the JWS payload, the PKCS#7 payload, the iOS 6 `purchase-info`), so the receipt
    /// still parses and only its signature gives it away.
    private mutating func makeForged() -> GeneratedJob {
        let original = genuine[random.below(genuine.count)]
        let transactionID = Array((original.transactionID ?? "").utf8)
        let forgedProof: ReceiptJob.Proof
        switch (original.job.proof, original.format) {
        case (.signedTransaction(let jws), _):
            forgedProof = .signedTransaction(Self.forgingJWS(jws, transactionID: transactionID) ?? jws)
        case (.receipt(let base64), .transactionReceipt):
            forgedProof = .receipt(Self.forgingTransactionReceipt(base64, transactionID: transactionID) ?? base64)
        case (.receipt(let base64), _):
            let bytes = [UInt8](Data(base64Encoded: base64) ?? Data())
            let forged = Self.alteringDigit(of: transactionID, in: bytes).map { Data($0).base64EncodedString() }
            forgedProof = .receipt(forged ?? base64)
        default:
            forgedProof = original.job.proof
        }
        return GeneratedJob(
            category: .forged, job: newJob(forgedProof), format: original.format, environment: original.environment,
            transactionID: nil, isReplayByAnotherAccount: false)
    }

    /// Another payload under the old signature.
    static func forgingJWS(_ jws: String, transactionID: [UInt8]) -> String? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]).map({ [UInt8]($0) }),
            let forged = alteringDigit(of: transactionID, in: payload)
        else { return nil }
        return [parts[0], Base64URL.encode(forged), parts[2]].joined(separator: ".")
    }

    /// An iOS 6 receipt whose `purchase-info` (base64 inside the base64 OpenStep text) names another transaction.
    static func forgingTransactionReceipt(_ base64: String, transactionID: [UInt8]) -> String? {
        let marker = "\"purchase-info\" = \""
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8),
            let start = text.range(of: marker)?.upperBound, let end = text[start...].firstIndex(of: "\""),
            let info = Data(base64Encoded: String(text[start..<end])),
            let forged = alteringDigit(of: transactionID, in: [UInt8](info))
        else { return nil }
        let forgedText = text.replacingCharacters(in: start..<end, with: Data(forged).base64EncodedString())
        return Data(forgedText.utf8).base64EncodedString()
    }

    /// `bytes` with the last digit of the first occurrence of `needle` changed (9 becomes 0, others go up by one).
    static func alteringDigit(of needle: [UInt8], in bytes: [UInt8]) -> [UInt8]? {
        guard !needle.isEmpty, needle.count <= bytes.count else { return nil }
        for start in 0...(bytes.count - needle.count) where bytes[start..<(start + needle.count)].elementsEqual(needle)
        {
            guard let index = (start..<(start + needle.count)).last(where: { (0x30...0x39).contains(bytes[$0]) })
            else { return nil }
            var forged = bytes
            forged[index] = bytes[index] == 0x39 ? 0x30 : bytes[index] + 1
            return forged
        }
        return nil
    }

}

/// `count` generated jobs as an async sequence, minting through the generator's ``ReceiptMinting`` (for tools
/// that stream traffic, such as `verify-worker submit --generate seed-mix`).
public struct SeedTrafficSequence: AsyncSequence {
    public typealias Element = GeneratedJob
    let generator: SeedTrafficGenerator
    let count: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        var generator: SeedTrafficGenerator
        var remaining: Int

        public mutating func next() async throws -> GeneratedJob? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            return try await generator.nextJob()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(generator: generator, remaining: count) }
}
