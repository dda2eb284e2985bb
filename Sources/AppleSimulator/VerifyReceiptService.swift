import Foundation
import Messages
import NIOCore
import Synchronization

/// Which verifyReceipt host a request reached.
public enum VerifyReceiptEndpoint: Sendable {
    case production
    case sandbox

    var environment: AppleEnvironment { self == .production ? .production : .sandbox }
}

/// Apple's legacy `verifyReceipt`, answered from the receipt itself: the simulator checks its own signature
/// (stateless, so restarts with a state directory keep accepting earlier mints) and overlays what its
/// registry knows (renewals, refunds).
///
/// Answers are cached by receipt text: the signature check and the JSON body are computed once per receipt and
/// reused until the receipt's subscription families change, a subscription crosses its expiry, or the cache
/// (a simple size cap) is emptied.
final class VerifyReceiptService: Sendable {
    /// A verifyReceipt answer: the JSON body and the `status` inside it.
    struct Answer: Sendable {
        var status: Int
        var body: [UInt8]
        /// `body` as the buffer a response sends: made once, so a cached answer is sent without a copy.
        var buffer: ByteBuffer

        init(status: Int, body: [UInt8]) {
            self.status = status
            self.body = body
            self.buffer = ByteBuffer(bytes: body)
        }
    }

    private struct CacheKey: Hashable {
        var receipt: String
        var excludeOld: Bool
    }

    /// What the simulator read from a receipt, cached with the answer built from it.
    private enum ReceiptReading {
        case malformed
        case notMinted
        case verified(environment: AppleEnvironment, hasSubscriptions: Bool, bundleId: String, answer: Answer)
    }

    private struct CacheEntry {
        var reading: ReceiptReading
        /// Family → version when the answer was built.
        var families: [String: Int]
        /// The answer must be rebuilt once now reaches this (a subscription expires).
        var validUntilMs: Int64
    }

    private let pki: SimulatorPKI
    private let registry: TransactionRegistry
    private let sharedSecret: String?
    /// Each listed app's shared secret, by bundle id (``SimulatedApp``).
    private let appSecrets: [String: String]
    private let now: @Sendable () -> Date
    private let cache = Mutex<[CacheKey: CacheEntry]>([:])
    /// Final answers keyed by endpoint and the exact request body: a repeated request skips JSON decoding.
    private let answers = Mutex<[AnswerKey: CachedAnswer]>([:])

    /// The request body as received: hashing and comparing a buffer costs less than decoding it into a string.
    /// Equality compares every byte; the hash reads only the length and the last 256 bytes (a receipt's signature
    /// sits at its end), so a lookup does not hash kilobytes of base64.
    private struct AnswerKey: Hashable {
        var endpoint: VerifyReceiptEndpoint
        var body: ByteBuffer

        func hash(into hasher: inout Hasher) {
            hasher.combine(endpoint)
            hasher.combine(body.readableBytes)
            body.withUnsafeReadableBytes { bytes in
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.suffix(256)))
            }
        }

        static func == (lhs: AnswerKey, rhs: AnswerKey) -> Bool {
            lhs.endpoint == rhs.endpoint && lhs.body == rhs.body
        }
    }

    private struct CachedAnswer {
        var answer: Answer
        var families: [String: Int]
        var validUntilMs: Int64
    }
    private let maximumCacheEntries: Int

    init(
        pki: SimulatorPKI, registry: TransactionRegistry, sharedSecret: String?, apps: [SimulatedApp] = [],
        maximumCacheEntries: Int, now: @escaping @Sendable () -> Date
    ) {
        var appSecrets: [String: String] = [:]
        for app in apps { appSecrets[app.bundleId] = app.sharedSecret }
        self.appSecrets = appSecrets
        self.pki = pki
        self.registry = registry
        self.sharedSecret = sharedSecret
        self.maximumCacheEntries = maximumCacheEntries
        self.now = now
    }

    static func statusOnly(_ status: Int) -> Answer {
        Answer(status: status, body: Array("{\"status\":\(status)}".utf8))
    }

    /// Answers one request body.
    func answer(requestBody: [UInt8], endpoint: VerifyReceiptEndpoint) -> Answer {
        answer(requestBody: ByteBuffer(bytes: requestBody), endpoint: endpoint)
    }

    /// Answers one request body, as received.
    func answer(requestBody: ByteBuffer, endpoint: VerifyReceiptEndpoint) -> Answer {
        let nowMs = AppleDates.nowMs(now())
        let answerKey = AnswerKey(endpoint: endpoint, body: requestBody)
        if let cached = answers.withLock({ $0[answerKey] }),
            isFresh(families: cached.families, validUntilMs: cached.validUntilMs, nowMs: nowMs)
        {
            return cached.answer
        }
        let bytes = requestBody.getBytes(at: requestBody.readerIndex, length: requestBody.readableBytes) ?? []
        let (answer, entry) = decide(requestBody: bytes, endpoint: endpoint, nowMs: nowMs)
        if let entry {
            let cached = CachedAnswer(answer: answer, families: entry.families, validUntilMs: entry.validUntilMs)
            answers.withLock { answers in
                if answers.count >= maximumCacheEntries { answers.removeAll(keepingCapacity: true) }
                answers[answerKey] = cached
            }
        }
        return answer
    }

    /// The answer, and the cache entry it came from (nil when the body was not even readable).
    private func decide(
        requestBody: [UInt8], endpoint: VerifyReceiptEndpoint, nowMs: Int64
    ) -> (Answer, CacheEntry?) {
        guard let request = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: Data(requestBody)) else {
            return (Self.statusOnly(21000), nil)
        }
        guard let receipt = request.receiptData, !receipt.isEmpty else { return (Self.statusOnly(21002), nil) }
        let key = CacheKey(receipt: receipt, excludeOld: request.excludeOldTransactions)
        let entry: CacheEntry
        if let cached = cache.withLock({ $0[key] }),
            isFresh(families: cached.families, validUntilMs: cached.validUntilMs, nowMs: nowMs)
        {
            entry = cached
        } else {
            entry = build(receipt: receipt, excludeOld: request.excludeOldTransactions, nowMs: nowMs)
            cache.withLock { cache in
                if cache.count >= maximumCacheEntries { cache.removeAll(keepingCapacity: true) }
                cache[key] = entry
            }
        }
        switch entry.reading {
        case .malformed:
            return (Self.statusOnly(21002), entry)
        case .notMinted:
            return (Self.statusOnly(21003), entry)
        case .verified(let environment, _, let bundleId, let answer):
            if environment != endpoint.environment {
                return (Self.statusOnly(endpoint == .production ? 21007 : 21008), entry)
            }
            if let appSecret = appSecrets[bundleId] {
                // A listed app's receipt needs that app's secret: another app's (or none) is 21004.
                guard let password = request.password, constantTimeEqual(password, appSecret) else {
                    return (Self.statusOnly(21004), entry)
                }
            } else if let sharedSecret, let password = request.password, !constantTimeEqual(password, sharedSecret) {
                return (Self.statusOnly(21004), entry)
            }
            return (answer, entry)
        }
    }

    private func isFresh(families: [String: Int], validUntilMs: Int64, nowMs: Int64) -> Bool {
        guard nowMs < validUntilMs else { return false }
        for (family, version) in families where registry.familyVersion(family) != version { return false }
        return true
    }

    private func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<min(x.count, y.count) { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    // MARK: Building answers

    private func build(receipt: String, excludeOld: Bool, nowMs: Int64) -> CacheEntry {
        let never = Int64.max
        guard let data = Data(base64Encoded: receipt, options: .ignoreUnknownCharacters), let first = data.first
        else { return CacheEntry(reading: .malformed, families: [:], validUntilMs: never) }
        let bytes = Array(data)
        do throws(SimulatedAppReceipt.DecodeFailure) {
            if first == 0x30 {
                let appReceipt = try SimulatedAppReceipt.decode(bytes, pki: pki)
                return appReceiptEntry(appReceipt, raw: receipt, excludeOld: excludeOld, nowMs: nowMs)
            } else if first == UInt8(ascii: "{") {
                let decoded = try SimulatedTransactionReceipt.decode(bytes, pki: pki)
                return transactionReceiptEntry(decoded, raw: receipt, nowMs: nowMs)
            }
            return CacheEntry(reading: .malformed, families: [:], validUntilMs: never)
        } catch {
            switch error {
            case .malformed: return CacheEntry(reading: .malformed, families: [:], validUntilMs: never)
            case .notSignedBySimulator: return CacheEntry(reading: .notMinted, families: [:], validUntilMs: never)
            }
        }
    }

    /// The registry's view of a purchase (refunds), or the receipt's when the registry does not know it.
    private func current(_ purchase: SimulatedTransaction) -> SimulatedTransaction {
        registry.transaction(purchase.transactionId) ?? purchase
    }

    /// The whole family of a subscription purchase: the registry's transactions plus those in the receipt.
    private func family(of purchases: [SimulatedTransaction], originalId: String) -> [SimulatedTransaction] {
        var byId: [String: SimulatedTransaction] = [:]
        for purchase in purchases where purchase.originalTransactionId == originalId {
            byId[purchase.transactionId] = current(purchase)
        }
        for transaction in registry.family(originalId) { byId[transaction.transactionId] = transaction }
        return byId.values.sorted { ($0.purchaseDateMs, $0.transactionId) < ($1.purchaseDateMs, $1.transactionId) }
    }

    private func appReceiptEntry(
        _ receipt: SimulatedAppReceipt, raw: String, excludeOld: Bool, nowMs: Int64
    ) -> CacheEntry {
        var validUntil = Int64.max
        // Every family is watched, so a refund of a one-off purchase shows up too.
        var versions: [String: Int] = [:]
        for purchase in receipt.purchases {
            versions[purchase.originalTransactionId] = registry.familyVersion(purchase.originalTransactionId)
        }
        let subscriptionFamilies = Array(
            Set(receipt.purchases.filter(\.isSubscription).map(\.originalTransactionId))
        ).sorted()
        let requestDate = nowMs
        var body: [String: Any] = [
            "status": 0,
            "environment": receipt.environment.rawValue,
            "receipt": [
                "receipt_type": receipt.environment.receiptType,
                "adam_id": 0,
                "app_item_id": 0,
                "bundle_id": receipt.bundleId,
                "application_version": receipt.appVersion,
                "download_id": 0,
                "version_external_identifier": 0,
                "original_application_version": receipt.originalAppVersion,
                "in_app": receipt.purchases.map { Self.inAppEntry(current($0)) },
            ].merging(Self.dateFields("receipt_creation_date", receipt.creationDateMs)) { a, _ in a }
                .merging(Self.dateFields("request_date", requestDate)) { a, _ in a }
                .merging(Self.dateFields("original_purchase_date", receipt.creationDateMs)) { a, _ in a },
        ]
        if !subscriptionFamilies.isEmpty {
            var latestInfo: [[String: Any]] = []
            var pending: [[String: Any]] = []
            for originalId in subscriptionFamilies {
                versions[originalId] = registry.familyVersion(originalId)
                let members = family(of: receipt.purchases, originalId: originalId)
                guard let latest = members.last else { continue }
                let listed = excludeOld ? [latest] : members
                latestInfo += listed.map { Self.inAppEntry($0) }
                if let expires = latest.expiresDateMs, expires > nowMs { validUntil = min(validUntil, expires) }
                let active = (latest.expiresDateMs ?? 0) > nowMs && latest.revocationDateMs == nil
                var renewal: [String: Any] = [
                    "auto_renew_product_id": latest.productId,
                    "product_id": latest.productId,
                    "original_transaction_id": originalId,
                    "auto_renew_status": active ? "1" : "0",
                ]
                if !active { renewal["expiration_intent"] = latest.revocationDateMs == nil ? "1" : "2" }
                pending.append(renewal)
            }
            body["latest_receipt_info"] = latestInfo
            body["latest_receipt"] = raw
            body["pending_renewal_info"] = pending
        }
        let answer = Answer(status: 0, body: Self.json(body))
        return CacheEntry(
            reading: .verified(
                environment: receipt.environment, hasSubscriptions: !subscriptionFamilies.isEmpty,
                bundleId: receipt.bundleId, answer: answer),
            families: versions, validUntilMs: validUntil)
    }

    private func transactionReceiptEntry(
        _ decoded: SimulatedTransactionReceipt.Decoded, raw: String, nowMs: Int64
    ) -> CacheEntry {
        let transaction = decoded.transaction
        var receiptObject: [String: Any] = [:]
        for (key, value) in decoded.purchaseInfo {
            receiptObject[key.replacingOccurrences(of: "-", with: "_")] = value
        }
        let mine = current(transaction)
        if let revoked = mine.revocationDateMs {
            receiptObject.merge(Self.dateFields("cancellation_date", revoked)) { _, new in new }
            receiptObject["cancellation_reason"] = String(mine.revocationReason ?? 0)
        }
        var body: [String: Any] = ["status": 0, "receipt": receiptObject]
        var versions = [transaction.originalTransactionId: registry.familyVersion(transaction.originalTransactionId)]
        var validUntil = Int64.max
        var status = 0
        if transaction.isSubscription {
            let originalId = transaction.originalTransactionId
            versions[originalId] = registry.familyVersion(originalId)
            let latest = family(of: [transaction], originalId: originalId).last ?? mine
            var latestObject: [String: Any] = [:]
            for (key, value) in SimulatedTransactionReceipt.purchaseInfo(latest) {
                latestObject[key.replacingOccurrences(of: "-", with: "_")] = value
            }
            if let revoked = latest.revocationDateMs {
                latestObject.merge(Self.dateFields("cancellation_date", revoked)) { _, new in new }
                latestObject["cancellation_reason"] = String(latest.revocationReason ?? 0)
            }
            let expires = latest.expiresDateMs ?? 0
            if expires <= nowMs {
                // 21006: valid receipt, expired subscription; the body is still there.
                status = 21006
                body["status"] = 21006
                body["latest_expired_receipt_info"] = latestObject
            } else {
                validUntil = expires
                body["latest_receipt_info"] = latestObject
                body["latest_receipt"] =
                    latest.transactionId == transaction.transactionId
                    ? raw : ((try? SimulatedTransactionReceipt.encode(latest, pki: pki)) ?? raw)
            }
        }
        let answer = Answer(status: status, body: Self.json(body))
        return CacheEntry(
            reading: .verified(
                environment: transaction.environment, hasSubscriptions: transaction.isSubscription,
                bundleId: transaction.bundleId, answer: answer),
            families: versions, validUntilMs: validUntil)
    }

    /// One `in_app` / `latest_receipt_info` element (iOS 7+ shape).
    static func inAppEntry(_ transaction: SimulatedTransaction) -> [String: Any] {
        var entry: [String: Any] = [
            "quantity": String(transaction.quantity),
            "product_id": transaction.productId,
            "transaction_id": transaction.transactionId,
            "original_transaction_id": transaction.originalTransactionId,
            "is_trial_period": "false",
            "in_app_ownership_type": "PURCHASED",
        ]
        entry.merge(dateFields("purchase_date", transaction.purchaseDateMs)) { a, _ in a }
        entry.merge(dateFields("original_purchase_date", transaction.originalPurchaseDateMs)) { a, _ in a }
        if let expires = transaction.expiresDateMs {
            entry.merge(dateFields("expires_date", expires)) { a, _ in a }
            entry["is_in_intro_offer_period"] = "false"
            entry["subscription_group_identifier"] = SimulatedJWS.subscriptionGroup
        }
        if let wolii = transaction.webOrderLineItemId { entry["web_order_line_item_id"] = wolii }
        if let token = transaction.appAccountToken { entry["app_account_token"] = token }
        if let revoked = transaction.revocationDateMs {
            entry.merge(dateFields("cancellation_date", revoked)) { a, _ in a }
            entry["cancellation_reason"] = String(transaction.revocationReason ?? 0)
        }
        return entry
    }

    /// `name`, `name_ms` and `name_pst`.
    static func dateFields(_ name: String, _ ms: Int64) -> [String: Any] {
        [name: AppleDates.gmt(ms), name + "_ms": String(ms), name + "_pst": AppleDates.pst(ms)]
    }

    static func json(_ object: [String: Any]) -> [UInt8] {
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{\"status\":21002}".utf8)
        return Array(data)
    }
}

/// `{"receipt-data", "password"?, "exclude-old-transactions"?}`; odd types for the flag are tolerated.
struct VerifyReceiptRequest: Decodable {
    var receiptData: String?
    var password: String?
    var excludeOldTransactions: Bool

    enum CodingKeys: String, CodingKey {
        case receiptData = "receipt-data"
        case password
        case excludeOldTransactions = "exclude-old-transactions"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        receiptData = try? container.decodeIfPresent(String.self, forKey: .receiptData)
        password = try? container.decodeIfPresent(String.self, forKey: .password)
        if let flag = try? container.decodeIfPresent(Bool.self, forKey: .excludeOldTransactions) {
            excludeOldTransactions = flag
        } else if let text = try? container.decodeIfPresent(String.self, forKey: .excludeOldTransactions) {
            excludeOldTransactions = text == "true" || text == "1"
        } else {
            excludeOldTransactions = false
        }
    }
}
