import Foundation

/// Reads the plain shape of jobs and verdicts by hand: objects, arrays of objects, strings without escapes,
/// integers, booleans and `null`, nested at most two deep. Anything else (an escape, a float, deeper nesting, a
/// repeated key, a value the contract refuses) is not an answer here: the caller then decodes with `JSONDecoder`,
/// which accepts the same messages and reports every refusal with its precise ``MessageError``. So this reader only
/// ever returns what `JSONDecoder` would have returned, only faster (`bench pipeline` (b): `JSONDecoder` scanned
/// each 4 KB job and built a value map before decoding it).
struct MessageJSONReader {
    /// A value of the plain shape.
    enum Value {
        case string(String)
        case integer(Int)
        case boolean(Bool)
        case null
        case array([Object])
        case object(Object)
    }

    /// An object's fields in order (a repeated key is not the plain shape).
    struct Object {
        var fields: [(key: String, value: Value)] = []

        subscript(_ key: String) -> Value? {
            for field in fields where field.key == key { return field.value }
            return nil
        }

        /// The value under `key` as `read` takes it, or `.some(nil)` when absent or `null`; nil, which ends the fast
        /// path, when `read` refuses it (a wrong type, a required field missing).
        func optional<T>(_ key: String, _ read: (Value) -> T?) -> T?? {
            switch self[key] {
            case nil, .null?: .some(nil)
            case let value?: read(value).map { .some($0) }
            }
        }

        func optionalString(_ key: String) -> String?? {
            optional(key) { value in
                if case .string(let text) = value { return text }
                return nil
            }
        }

        func requiredString(_ key: String) -> String? {
            if case .string(let text)? = self[key] { return text }
            return nil
        }

        func optionalDate(_ key: String) -> Date?? {
            switch optionalString(key) {
            case .some(nil): .some(nil)
            case .some(let text?): RFC3339.parse(text).map { .some($0) }
            case nil: nil
            }
        }

        func optionalInteger(_ key: String) -> Int?? {
            optional(key) { value in
                if case .integer(let integer) = value { return integer }
                return nil
            }
        }

        func optionalBoolean(_ key: String) -> Bool?? {
            optional(key) { value in
                if case .boolean(let flag) = value { return flag }
                return nil
            }
        }

        /// The object under `key` as `read` takes it (nil: a required field is missing), as ``optional(_:_:)``.
        func optionalObject<T>(_ key: String, _ read: (Object) -> T?) -> T?? {
            optional(key) { value in
                if case .object(let object) = value { return read(object) }
                return nil
            }
        }

        /// A Google Play purchase object of the plain shape, or `.some(nil)` when absent or `null`.
        func optionalGooglePlayPurchase(_ key: String) -> GooglePlayPurchase?? {
            optionalObject(key) { object in
                guard let packageName = object.requiredString("package_name"),
                    let productID = object.requiredString("product_id"),
                    let purchaseToken = object.requiredString("purchase_token"),
                    case .some(let purchaseData) = object.optionalString("purchase_data"),
                    case .some(let signature) = object.optionalString("signature")
                else { return nil }
                return GooglePlayPurchase(
                    packageName: packageName, productID: productID, purchaseToken: purchaseToken,
                    purchaseData: purchaseData, signature: signature)
            }
        }

        /// A Google Play notification object of the plain shape, or `.some(nil)` when absent or `null`.
        func optionalGooglePlayNotification(_ key: String) -> GooglePlayNotification?? {
            optionalObject(key) { object in
                guard let packageName = object.requiredString("package_name"),
                    case .some(let purchaseToken) = object.optionalString("purchase_token"),
                    case .some(let notification) = object.optionalString("notification"),
                    case .some(let messageID) = object.optionalString("message_id"),
                    case .some(let publishedAt) = object.optionalDate("published_at")
                else { return nil }
                return GooglePlayNotification(
                    packageName: packageName, purchaseToken: purchaseToken, notification: notification,
                    messageID: messageID, publishedAt: publishedAt)
            }
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The top-level object, or nil when the bytes are not of the plain shape.
    static func object(in bytes: some Collection<UInt8>) -> Object? {
        let answer = bytes.withContiguousStorageIfAvailable { buffer -> Object? in
            var reader = MessageJSONReader(buffer)
            return reader.document()
        }
        if let answer { return answer }
        return Array(bytes).withUnsafeBufferPointer { buffer in
            var reader = MessageJSONReader(buffer)
            return reader.document()
        }
    }

    // MARK: Messages

    static func job(from bytes: some Collection<UInt8>) -> ReceiptJob? {
        guard let object = object(in: bytes), object.requiredString("schema") == ReceiptJob.schema,
            let jobID = object.requiredString("job_id"), let accountID = object.requiredString("account_id"),
            case .some(let deviceID) = object.optionalString("device_id"),
            case .some(let bundleID) = object.optionalString("bundle_id"),
            case .some(let expectedProductID) = object.optionalString("expected_product_id"),
            case .some(let submittedAt) = object.optionalDate("submitted_at"),
            case .some(let appAccountToken) = object.optionalString("app_account_token"),
            case .some(let receipt) = object.optionalString("receipt"),
            case .some(let signedTransaction) = object.optionalString("signed_transaction"),
            case .some(let transactionID) = object.optionalString("transaction_id"),
            case .some(let notification) = object.optionalString("notification"),
            case .some(let googlePlay) = object.optionalGooglePlayPurchase("google_play"),
            case .some(let googlePlayNotification) = object.optionalGooglePlayNotification("google_play_notification")
        else { return nil }
        let proofs: [ReceiptJob.Proof] = [
            receipt.map { .receipt($0) }, signedTransaction.map { .signedTransaction($0) },
            transactionID.map { .transactionID($0) }, notification.map { .notification($0) },
            googlePlay.map { .googlePlay($0) }, googlePlayNotification.map { .googlePlayNotification($0) },
        ].compactMap { $0 }
        guard proofs.count == 1, let proof = proofs.first else { return nil }
        let job = ReceiptJob(
            jobID: jobID, accountID: accountID, proof: proof, deviceID: deviceID, bundleID: bundleID,
            expectedProductID: expectedProductID, submittedAt: submittedAt, appAccountToken: appAccountToken)
        guard (try? job.validate()) != nil else { return nil }
        return job
    }

    static func verdict(from bytes: some Collection<UInt8>) -> Verdict? {
        guard let object = object(in: bytes), object.requiredString("schema") == Verdict.schema,
            let verdictID = object.requiredString("verdict_id"), let jobID = object.requiredString("job_id"),
            let accountID = object.requiredString("account_id"),
            let outcome = object.requiredString("outcome").flatMap(Verdict.Outcome.init(rawValue:)),
            case .some(let reason) = object.optionalString("reason"),
            let decidedBy = object.requiredString("decided_by").flatMap(Verdict.DecidedBy.init(rawValue:)),
            case .some(let storeName) = object.optionalString("store"),
            let store = storeName.map(Store.init(rawValue:)) ?? .appStore,
            case .some(let environment) = object.optionalString("environment"),
            case .array(let transactionObjects)? = object["transactions"],
            case .some(let appleStatus) = object.optionalInteger("apple_status"),
            let decidedAt = object.requiredString("decided_at").flatMap(RFC3339.parse),
            outcome == .granted || reason != nil
        else { return nil }
        var transactions: [Verdict.Transaction] = []
        transactions.reserveCapacity(transactionObjects.count)
        for item in transactionObjects {
            guard let transactionID = item.requiredString("transaction_id"),
                case .some(let originalTransactionID) = item.optionalString("original_transaction_id"),
                let productID = item.requiredString("product_id"),
                case .some(let purchaseDate) = item.optionalDate("purchase_date"),
                case .some(let expiresDate) = item.optionalDate("expires_date"),
                case .some(let revokedAt) = item.optionalDate("revoked_at"),
                case .some(let quantity) = item.optionalInteger("quantity"),
                case .some(let inBillingRetry) = item.optionalBoolean("in_billing_retry"),
                case .some(let graceEnd) = item.optionalDate("grace_period_expires_date"),
                case .some(let orderID) = item.optionalString("order_id"),
                case .some(let purchaseToken) = item.optionalString("purchase_token"),
                case .some(let paused) = item.optionalBoolean("paused"),
                case .some(let revocationType) = item.optionalString("revocation_type"),
                case .some(let revocationPercentage) = item.optionalInteger("revocation_percentage"),
                case .some(let revocationReason) = item.optionalInteger("revocation_reason"),
                case .some(let ownershipType) = item.optionalString("in_app_ownership_type")
            else { return nil }
            transactions.append(
                Verdict.Transaction(
                    transactionID: transactionID, originalTransactionID: originalTransactionID, productID: productID,
                    purchaseDate: purchaseDate, expiresDate: expiresDate, revokedAt: revokedAt, quantity: quantity,
                    inBillingRetry: inBillingRetry, gracePeriodExpiresDate: graceEnd, orderID: orderID,
                    purchaseToken: purchaseToken, paused: paused,
                    revocation: Revocation(
                        type: revocationType.map { Revocation.Kind($0) }, percentage: revocationPercentage,
                        reason: revocationReason),
                    ownershipType: ownershipType.map { OwnershipType($0) }))
        }
        // The id as read, not as derived: a consumer keeps the id it was given.
        return Verdict(
            verdictID: verdictID, jobID: jobID, accountID: accountID, outcome: outcome,
            reason: reason.map(Verdict.Reason.init(rawValue:)), decidedBy: decidedBy, store: store,
            environment: environment,
            transactions: transactions, appleStatus: appleStatus, decidedAt: decidedAt)
    }

    // MARK: Grammar

    private mutating func document() -> Object? {
        skipWhitespace()
        guard let object = object(depth: 0) else { return nil }
        skipWhitespace()
        return index == bytes.count ? object : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func consume(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func object(depth: Int) -> Object? {
        guard consume(UInt8(ascii: "{")) else { return nil }
        var object = Object()
        // Room for a job's or a verdict's fields at once: grown one by one, the array was allocated four times.
        object.fields.reserveCapacity(16)
        skipWhitespace()
        if consume(UInt8(ascii: "}")) { return object }
        while true {
            skipWhitespace()
            guard let key = string() else { return nil }
            guard object[key] == nil else { return nil }
            skipWhitespace()
            guard consume(UInt8(ascii: ":")) else { return nil }
            skipWhitespace()
            guard let value = value(depth: depth) else { return nil }
            object.fields.append((key, value))
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return object }
            guard consume(UInt8(ascii: ",")) else { return nil }
        }
    }

    /// Consumes `word` when the bytes at the cursor spell it.
    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        let matches = word.withUTF8Buffer { expected in
            expected.indices.allSatisfy { bytes[index + $0] == expected[$0] }
        }
        if matches { index += count }
        return matches
    }

    private mutating func value(depth: Int) -> Value? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            return string().map { .string($0) }
        case UInt8(ascii: "n"):
            guard bytes.count - index >= 4, bytes[index + 1] == UInt8(ascii: "u"),
                bytes[index + 2] == UInt8(ascii: "l"),
                bytes[index + 3] == UInt8(ascii: "l")
            else { return nil }
            index += 4
            return .null
        case UInt8(ascii: "t"):
            guard literal("true") else { return nil }
            return .boolean(true)
        case UInt8(ascii: "f"):
            guard literal("false") else { return nil }
            return .boolean(false)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return integer().map { .integer($0) }
        case UInt8(ascii: "["):
            guard depth == 0 else { return nil }
            index += 1
            var items: [Object] = []
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return .array(items) }
            while true {
                skipWhitespace()
                guard let item = object(depth: depth + 1) else { return nil }
                items.append(item)
                skipWhitespace()
                if consume(UInt8(ascii: "]")) { return .array(items) }
                guard consume(UInt8(ascii: ",")) else { return nil }
            }
        case UInt8(ascii: "{"):
            guard depth == 0 else { return nil }
            return object(depth: depth + 1).map { .object($0) }
        default:
            return nil
        }
    }

    /// A string without escapes or control characters, in valid UTF-8.
    private mutating func string() -> String? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        let start = index
        var ascii = true
        // Eight bytes at a time while none of them ends the string or needs a look (every job's proof is ~4 KB of
        // base64: the byte loop alone was 8 % of a worker's CPU in `bench pipeline` (b)); the byte loop then
        // decides from the first word that holds such a byte.
        if let base = bytes.baseAddress.map(UnsafeRawPointer.init) {
            // Four words per round while all are plain: their tests are independent, one branch decides (a 4 KB
            // proof took 512 rounds of one word each, a sixth of decoding a job).
            while index + 32 <= bytes.count {
                let found =
                    Self.specialBits(base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                    | Self.specialBits(base.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self))
                    | Self.specialBits(base.loadUnaligned(fromByteOffset: index + 16, as: UInt64.self))
                    | Self.specialBits(base.loadUnaligned(fromByteOffset: index + 24, as: UInt64.self))
                guard found == 0 else { break }
                index += 32
            }
            while index + 8 <= bytes.count,
                Self.isPlainASCII(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self)))
            {
                index += 8
            }
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return ascii ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        return nil
    }

    /// Whether none of eight bytes is a quote, a backslash, a control character (below 0x20) or not ASCII (from
    /// 0x80). Word-at-a-time tests: for ASCII bytes, `(x - 0x01…) & ~x & 0x80…` is non-zero exactly when some byte
    /// of `x` is zero (and `(x - 0x20…) & ~x & 0x80…` when some byte is below 0x20); a byte equal to `c` is a zero
    /// byte of `x ^ c…`. A word with any high bit set is refused before those matter.
    static func isPlainASCII(_ word: UInt64) -> Bool {
        specialBits(word) == 0
    }

    /// Non-zero exactly when some byte of `word` is not plain (``isPlainASCII(_:)``), in either byte order (a borrow
    /// only carries up from a byte that is itself found), so the words of a run can be tested together.
    @inline(__always)
    static func specialBits(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslashes = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        let found =
            word | ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)
            | ((word &- ones &* 0x20) & ~word)
        return found & highs
    }

    /// An integer as JSON writes one (no fraction, no exponent, no leading zero) that fits in `Int`.
    private mutating func integer() -> Int? {
        let negative = consume(UInt8(ascii: "-"))
        let start = index
        var magnitude = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            let (shifted, overflowShift) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowAdd) = shifted.addingReportingOverflow(Int(bytes[index] - UInt8(ascii: "0")))
            guard !overflowShift, !overflowAdd else { return nil }
            magnitude = sum
            index += 1
        }
        let count = index - start
        guard count > 0, count == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        return negative ? -magnitude : magnitude
    }
}
