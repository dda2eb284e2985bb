import Foundation
import Messages
import RateLimiter
import Receipts
import Traffic

/// One adversarial message for `receipt-jobs`: the Kafka key and value bytes, and what kind of attack it is.
public struct AdversarialMessage: Sendable {
    /// The kinds of hostile input a frontend may pass through (or a compromised frontend may write).
    public enum Kind: String, Sendable, CaseIterable, Codable {
        /// Random bytes, not JSON at all.
        case randomBytes = "random_bytes"
        /// A job's JSON cut short.
        case truncatedJSON = "truncated_json"
        /// Fields far beyond their limits (ids, proofs, unknown fields), some past the message limit.
        case hugeField = "huge_field"
        /// Fields of the wrong JSON type (numbers for ids, objects for proofs, bad dates).
        case wrongTypes = "wrong_types"
        /// Arrays and objects nested thousands deep, at the top and inside fields.
        case deeplyNestedJSON = "deeply_nested_json"
        /// Invalid UTF-8 bytes and lone surrogates in strings.
        case invalidUTF8 = "invalid_utf8"
        /// Large base64 proofs, and base64 nested in base64 many times over.
        case base64Bomb = "base64_bomb"
        /// PKCS#7 (DER) with absurd lengths, indefinite forms and deep nesting.
        case absurdPKCS7 = "absurd_pkcs7"
        /// JWS with giant, malformed or hostile headers (`alg: none`, `x5u`/`jku` URLs, huge `x5c`).
        case hostileJWS = "hostile_jws"
        /// A real receipt with a few bytes mutated (the Receipts fuzzer's mutations).
        case mutatedReceipt = "mutated_receipt"
        /// Proofs that name URLs or hosts, to tempt a worker into following them.
        case urlBait = "url_bait"
        /// Messages just under, at and just over each size limit on a message's way (``sizeLimits``): a job padded
        /// to the size (a verdict, or a dead letter `oversized` past the worker's limit) or bytes that are not JSON (a
        /// dead letter, whole or cut to fit). Each must end with its output and its partition committed past it.
        case sizeLimit = "size_limit"
        /// A job whose one identifier holds a control character, an invalid UTF-8 escape, a value of 256 or 257
        /// bytes, or a notification lane's account: a dead letter, or a job decided. Each comes with a ``AdversarialMessage/followUp``: a normal job on the same key that must be
        /// decided after it, so a message that holds its lane is found.
        case hostileIdentifier = "hostile_identifier"
    }

    public var kind: Kind
    /// Unique per message: the dead-letter topic keeps it, so a run can tell its messages apart.
    public var key: String
    public var value: [UInt8]
    /// A normal job to send right after this message on the same key (``Kind/hostileIdentifier``): it must get its
    /// verdict, whatever became of this message.
    public var followUp: [UInt8]?
}

/// A deterministic generator of hostile `receipt-jobs` messages, for the in-process fuzz test (decode and analyze)
/// and `verify-worker chaos --fuzz N` (through a live worker). The same seed gives the same messages.
///
/// Every message is either not a job at all (it must go to the dead-letter topic) or a job whose proof is not an
/// authentic purchase (it must be rejected): ``classify(_:codec:)`` says which, with the worker's own codec.
public struct AdversarialJobCorpus: Sendable {
    /// Real receipts (base64 or JWS text) to mutate; may be empty.
    public var receiptSeeds: [String]
    /// Prefix of every key and job id, so several runs can share topics.
    public var tag: String
    /// Where URL bait points: a listener that must never see a connection. Default: port 9 (discard) on loopback.
    public var baitURL: String
    /// Messages longer than this are cut to it (a cut job is truncated JSON: still hostile, and a dead letter).
    /// Live runs lower it to keep runs short. ``AdversarialMessage/Kind/sizeLimit`` messages are never cut: they
    /// are at most one byte over the largest of ``sizeLimits``, which every harness producer carries. Default: 2 MiB
    /// (every kind whole).
    public var maximumSize = 2 << 20
    /// The size limits a message meets on its way, in bytes: the worker's producer's `message.max.bytes` (its
    /// `max_produce_bytes` default, so a dead letter of such a message is cut), the worker's `max_message_bytes`
    /// default (1 MiB: larger is `oversized`), and Kafka's broker default `max.message.bytes` (1,048,588).
    public static let sizeLimits = [1_000_000, 1 << 20, 1_048_588]
    /// The stand-ins of ``sizeLimits`` for messages that must stay small (``heavyShare``).
    public static let smallSizeLimits = [1_024, 4_096, 16_384]
    /// Share of messages that may take their kind's large forms (megabyte proofs, 100,000-deep nesting, 200 KB JWS
    /// headers, 20,000 DER levels); the others keep every kind and variant but at a few kilobytes at most. 1 (every
    /// message at full size) is the in-process default; long live runs use about 0.01, so that a million inputs
    /// still hold thousands of each large form yet pass through a worker at its small-message speed. Default: 1.
    public var heavyShare = 1.0
    private var random: SplitMix64
    private var sequence = 0
    /// Whether the message being made may take its large forms.
    private var heavy = true

    public init(
        receiptSeeds: [String] = [], seed: UInt64 = 0xC4A0_5EED, tag: String = "fuzz",
        baitURL: String = "http://127.0.0.1:9/bait"
    ) {
        self.receiptSeeds = receiptSeeds
        self.tag = tag
        self.baitURL = baitURL
        self.random = SplitMix64(seed: seed)
    }

    /// What the worker must do with a message.
    public enum Expectation: Sendable, Equatable {
        /// Not a job: the dead-letter topic.
        case deadLetter
        /// A job: a verdict (for these inputs, a rejection).
        case job(ReceiptJob)
    }

    /// Decodes as the worker does.
    public static func classify(_ value: [UInt8], codec: MessageCodec = MessageCodec()) -> Expectation {
        do {
            return .job(try codec.decodeJob(value))
        } catch {
            return .deadLetter
        }
    }

    /// The next message; kinds rotate so every kind appears in any window of `Kind.allCases.count` messages.
    public mutating func next() -> AdversarialMessage {
        sequence += 1
        let kind = AdversarialMessage.Kind.allCases[(sequence - 1) % AdversarialMessage.Kind.allCases.count]
        let key = "\(tag)-\(sequence)"
        // Drawn only when some messages are to stay small: the default stream of messages is unchanged.
        heavy = heavyShare >= 1 || Double(random.next() % 1_000_000) < heavyShare * 1_000_000
        var value = make(kind, key: key)
        if kind != .sizeLimit, value.count > maximumSize { value.removeSubrange(maximumSize...) }
        let followUp = kind == .hostileIdentifier ? Self.followUp(key: key) : nil
        return AdversarialMessage(kind: kind, key: key, value: value, followUp: followUp)
    }

    /// `count` messages.
    public mutating func generate(count: Int) -> [AdversarialMessage] {
        (0..<count).map { _ in next() }
    }

    // MARK: Kinds

    private mutating func make(_ kind: AdversarialMessage.Kind, key: String) -> [UInt8] {
        switch kind {
        case .randomBytes: return randomBytes(count: below(512))
        case .truncatedJSON:
            let whole = jobJSON(key: key, proofField: "receipt", proof: .string(plausibleProof()))
            return Array(whole.prefix(below(max(1, whole.count))))
        case .hugeField: return hugeField(key: key)
        case .wrongTypes: return wrongTypes(key: key)
        case .deeplyNestedJSON: return deeplyNested(key: key)
        case .invalidUTF8: return invalidUTF8(key: key)
        case .base64Bomb: return base64Bomb(key: key)
        case .absurdPKCS7:
            return jobJSON(key: key, proofField: "receipt", proof: .string(Data(absurdDER()).base64EncodedString()))
        case .hostileJWS: return jobJSON(key: key, proofField: "signed_transaction", proof: .string(hostileJWS()))
        case .mutatedReceipt:
            guard !receiptSeeds.isEmpty else {
                return jobJSON(key: key, proofField: "receipt", proof: .string(plausibleProof()))
            }
            let seed = receiptSeeds[below(receiptSeeds.count)]
            let isJWS = seed.hasPrefix("eyJ")
            let mutated = ReceiptFuzzer.mutate(Array(seed.utf8), using: &random)
            // A mutation may leave invalid UTF-8; JSON cannot carry that, so it is replaced (still hostile text).
            return jobJSON(
                key: key, proofField: isJWS ? "signed_transaction" : "receipt",
                proof: .string(String(decoding: mutated, as: UTF8.self)))
        case .urlBait: return urlBait(key: key)
        case .sizeLimit: return atSizeLimit(key: key)
        case .hostileIdentifier: return hostileIdentifier(key: key)
        }
    }

    /// The string fields of a job that ``AdversarialMessage/Kind/hostileIdentifier`` attacks, one per message.
    public static let identifierFields = [
        "job_id", "account_id", "device_id", "bundle_id", "expected_product_id", "transaction_id", "app_account_token",
    ]

    /// What an attacked field holds: JSON string contents (escapes as written) or raw bytes.
    static let hostileValues: [[UInt8]] = [
        Array("ab\\u0000c".utf8), Array("\\u0000".utf8), Array("ab\\u001bc".utf8), Array("ab\\u007fc".utf8),
        Array("ab\\u0085c".utf8), Array("ab\\ud800c".utf8), Array("ab\\udc00".utf8), Array("ab\\nc".utf8),
        [0x61, 0x00, 0x62], [0x61, 0x1B, 0x62], [0x61, 0xC2, 0x85, 0x62], [0x61, 0xC3, 0x28],
        Array(String(repeating: "a", count: 256).utf8), Array(String(repeating: "b", count: 257).utf8),
        Array((String(repeating: "c", count: 255) + "\\u00e9").utf8), Array("apple-notification".utf8),
        Array("apple-notification/2000000000000001".utf8),
    ]

    /// The indices of ``hostileValues`` that no identifier may hold.
    static let refusedValueIndices = Array(0...11) + [13, 14]

    /// One identifier of a job attacked (or its proof, a cracker's receipt, in place of the field: the
    /// `transaction_id` case).
    private mutating func hostileIdentifier(key: String) -> [UInt8] {
        let field = Self.identifierFields[below(Self.identifierFields.count)]
        // A transaction id the codec accepts would be looked up at Apple: only the values it refuses.
        let choices = field == "transaction_id" ? Self.refusedValueIndices : Array(Self.hostileValues.indices)
        let value = Self.hostileValues[choices[below(choices.count)]]
        let proof = field == "transaction_id" ? "transaction_id" : "receipt"
        var fields: [(String, [UInt8])] = [
            ("schema", Array("receipt-job/v1".utf8)), ("job_id", Array(key.utf8)), ("account_id", Array(key.utf8)),
            ("bundle_id", Array("com.example.verifyworker".utf8)),
            (proof, Array("Y29tLnVydXMuaWFwLjk2NjU3Mjkw".utf8)),
        ]
        if let index = fields.firstIndex(where: { $0.0 == field }) {
            fields[index].1 = value
        } else {
            fields.append((field, value))
        }
        if field == "job_id" {
            // The job id is what the run tells jobs apart by: it keeps the key in front of the attack.
            fields[1].1 = Array((key + "-").utf8) + value
        }
        var bytes = Array("{".utf8)
        for (index, (name, text)) in fields.enumerated() {
            if index > 0 { bytes += Array(",".utf8) }
            bytes += Array("\"\(name)\":\"".utf8) + text + Array("\"".utf8)
        }
        return bytes + Array("}".utf8)
    }

    /// A normal job on `key`: a cracker's receipt, decided from its proof once its lane reaches it.
    static func followUp(key: String) -> [UInt8] {
        Array(
            ("{\"schema\":\"receipt-job/v1\",\"job_id\":\"\(key)-next\",\"account_id\":\"\(key)\","
                + "\"receipt\":\"Y29tLnVydXMuaWFwLjk2NjU3Mjkw\"}").utf8)
    }

    /// One byte under, at or one over one of the size limits (``sizeLimits``, or their small stand-ins).
    private mutating func atSizeLimit(key: String) -> [UInt8] {
        let limits = heavy ? Self.sizeLimits : Self.smallSizeLimits
        let size = limits[below(limits.count)] + below(3) - 1
        // Repeated bytes, not random ones: a megabyte drawn byte by byte would dominate the corpus's cost.
        if below(2) == 0 {
            // Raw, not escaped: the padding needs no escaping, and escaping a megabyte scalar by scalar is slow.
            let bare = jobJSON(key: key, proofField: "receipt", proof: .raw("\"\""))
            let padding = String(repeating: "A", count: max(0, size - bare.count))
            return jobJSON(key: key, proofField: "receipt", proof: .raw("\"" + padding + "\""))
        }
        return Array(repeating: UInt8(ascii: "x"), count: size)
    }

    private mutating func hugeField(key: String) -> [UInt8] {
        switch below(6) {
        case 0:  // An id past its 256-byte limit.
            return jobJSON(
                key: key, jobID: String(repeating: "j", count: 257 + below(large(100_000, small: 300))),
                proofField: "receipt",
                proof: .string("MIIT"))
        case 1:
            return jobJSON(
                key: key, accountID: String(repeating: "a", count: 257 + below(large(10_000, small: 300))),
                proofField: "receipt", proof: .string("MIIT"))
        case 2:  // A whole message past the 1 MiB limit.
            return jobJSON(
                key: key, proofField: "receipt",
                proof: .string(String(repeating: "A", count: large((1 << 20) + 16, small: 4_096))))
        case 3:  // An unknown field of 300 KB: tolerated, the job itself is garbage.
            return jobJSON(
                key: key, proofField: "receipt", proof: .string("bm90IGEgcmVjZWlwdA=="),
                extra: "\"padding\":\"\(String(repeating: "x", count: large(300_000, small: 4_096)))\"")
        case 4:  // A device id past its limit.
            return jobJSON(
                key: key, proofField: "receipt", proof: .string("MIIT"),
                extra: "\"device_id\":\"\(String(repeating: "d", count: 300 + below(large(5_000, small: 300))))\"")
        default:  // A JWS-looking proof of 600 KB: inside the message limit, garbage to the analysis.
            return jobJSON(
                key: key, proofField: "signed_transaction",
                proof: .string("eyJ" + String(repeating: "Q", count: large(600_000, small: 4_096)) + ".e30.AA"))
        }
    }

    private mutating func wrongTypes(key: String) -> [UInt8] {
        let base = "\"schema\":\"receipt-job/v1\",\"account_id\":\"\(key)\""
        let variants = [
            "{\(base),\"job_id\":12345,\"receipt\":\"MIIT\"}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":{\"data\":\"MIIT\"}}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":[\"MIIT\"]}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":true}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":null}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":\"MIIT\",\"submitted_at\":\"yesterday\"}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":\"MIIT\",\"submitted_at\":1700000000}",
            "{\"schema\":2,\"job_id\":\"\(key)\",\"account_id\":\"\(key)\",\"receipt\":\"MIIT\"}",
            "{\"schema\":\"receipt-job/v9\",\"job_id\":\"\(key)\",\"account_id\":\"\(key)\",\"receipt\":\"MIIT\"}",
            "{\(base),\"job_id\":\"\(key)\"}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":\"MIIT\",\"signed_transaction\":\"eyJ.e30.AA\"}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":\"\"}",
            "[\"\(key)\"]",
            "\"\(key)\"",
            "null",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":\"MIIT\",\"bundle_id\":[]}",
            "{\(base),\"job_id\":\"\(key)\",\"receipt\":1e999999}",
        ]
        return Array(variants[below(variants.count)].utf8)
    }

    private mutating func deeplyNested(key: String) -> [UInt8] {
        let depth = [64, 600, 5_000, large(100_000, small: 2_000)][below(4)]
        let open = below(2) == 0 ? "[" : "{\"a\":"
        let close = open == "[" ? "]" : "}"
        let nested = String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth)
        switch below(3) {
        case 0: return Array(nested.utf8)
        case 1: return jobJSON(key: key, proofField: "receipt", proof: .string("MIIT"), extra: "\"x\":\(nested)")
        default: return jobJSON(key: key, proofField: "receipt", proof: .raw(nested))
        }
    }

    private mutating func invalidUTF8(key: String) -> [UInt8] {
        let bad: [[UInt8]] = [
            [0xC0, 0x80], [0xFF], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xE2, 0x82],
        ]
        let prefix = Array(
            "{\"schema\":\"receipt-job/v1\",\"job_id\":\"\(key)\",\"account_id\":\"\(key)\",\"receipt\":\"".utf8)
        switch below(3) {
        case 0:
            return prefix + Array("MII".utf8) + bad[below(bad.count)] + Array("T\"}".utf8)
        case 1:  // A lone surrogate escape: valid JSON syntax, not a valid string.
            return prefix + Array("\\ud800MIIT\"}".utf8)
        default:  // Invalid UTF-8 in the id.
            return Array("{\"schema\":\"receipt-job/v1\",\"job_id\":\"".utf8) + bad[below(bad.count)]
                + Array("\",\"account_id\":\"\(key)\",\"receipt\":\"MIIT\"}".utf8)
        }
    }

    private mutating func base64Bomb(key: String) -> [UInt8] {
        switch below(3) {
        case 0:  // Base64 of base64 of … of a receipt-looking prefix, 12 layers deep.
            var text = "MIIT" + String(repeating: "A", count: 64)
            for _ in 0..<12 { text = Data(text.utf8).base64EncodedString() }
            return jobJSON(key: key, proofField: "receipt", proof: .string(text))
        case 1:  // 700 KB of decoded zeros: inside the limits, nothing to find.
            return jobJSON(
                key: key, proofField: "receipt",
                proof: .string(Data(count: large(700_000, small: 3_000)).base64EncodedString()))
        default:  // Base64 wrapped every 4 characters with spaces and line breaks.
            let chunks = stride(from: 0, to: large(40_000, small: 2_000), by: 4).map { _ in "MIIT" }
            return jobJSON(key: key, proofField: "receipt", proof: .string(chunks.joined(separator: "\n ")))
        }
    }

    /// DER that claims a PKCS#7 `signedData` and then lies about its lengths or nests without end.
    private mutating func absurdDER() -> [UInt8] {
        let signedData: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
        switch below(6) {
        case 0: return [0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF] + signedData
        case 1: return [0x30, 0x88, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + signedData + [0xA0, 0x80]
        case 2:
            return [0x30, 0x80] + signedData
                + Array(repeating: [0xA0, 0x80], count: large(20_000, small: 500)).flatMap { $0 }
        case 3:
            return [0x30, 0x82, 0x01, 0x00] + signedData
                + [0xA0, 0x84, 0x7F, 0xFF, 0xFF, 0xF0, 0x30, 0x84, 0x7F, 0xFF, 0xFF, 0xF0]
        case 4:  // A long chain of definite-length SEQUENCEs, each one byte too long for its parent.
            var bytes: [UInt8] = [0x02, 0x01, 0x00]
            for _ in 0..<large(2_000, small: 200) {
                bytes = [0x30, 0x82, UInt8((bytes.count + 1) >> 8), UInt8((bytes.count + 1) & 0xFF)] + bytes
            }
            return [0x30, 0x80] + signedData + bytes
        default: return [0x30, 0x81] + signedData + randomBytes(count: below(256))
        }
    }

    private mutating func hostileJWS() -> String {
        func b64url(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }
        let payload = b64url("{\"transactionId\":\"1000000000000001\",\"bundleId\":\"com.example.verifyworker\"}")
        switch below(7) {
        case 0: return b64url("{\"alg\":\"none\"}") + "." + payload + "."
        case 1: return b64url("{\"alg\":\"HS256\",\"kid\":\"x\"}") + "." + payload + "." + b64url("sig")
        case 2:  // A 200 KB header.
            return b64url(
                "{\"alg\":\"ES256\",\"x\":\"\(String(repeating: "h", count: large(200_000, small: 2_000)))\"}") + "."
                + payload
                + ".AA"
        case 3:  // Thousands of junk certificates in x5c.
            let chain = Array(repeating: "\"MIIB\"", count: large(5_000, small: 100)).joined(separator: ",")
            return b64url("{\"alg\":\"ES256\",\"x5c\":[\(chain)]}") + "." + payload + ".AA"
        case 4: return b64url("{\"alg\":\"ES256\",\"x5c\":\"not-an-array\"}") + "." + payload + ".AA"
        case 5: return "eyJ" + String(repeating: ".", count: below(large(5_000, small: 500)))
        default: return b64url("{\"alg\":\"ES256\",\"x5c\":[{\"a\":1}],\"crit\":[\"x\"]}") + ".%%%." + payload
        }
    }

    private mutating func urlBait(key: String) -> [UInt8] {
        func b64url(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }
        let payload = b64url("{\"transactionId\":\"1000000000000002\",\"bundleId\":\"com.example.verifyworker\"}")
        switch below(4) {
        case 0:
            return jobJSON(
                key: key, proofField: "signed_transaction",
                proof: .string(
                    b64url("{\"alg\":\"ES256\",\"x5u\":\"\(baitURL)\",\"jku\":\"\(baitURL)\"}")
                        + "." + payload + ".AA"))
        case 1: return jobJSON(key: key, proofField: "receipt", proof: .string(baitURL))
        case 2:
            return jobJSON(
                key: key, proofField: "receipt",
                proof: .string(
                    Data("{ \"signature\" = \"\(baitURL)\"; \"purchase-info\" = \"\(baitURL)\"; }".utf8)
                        .base64EncodedString()))
        default:
            return jobJSON(
                key: key, proofField: "receipt", proof: .string(Data(baitURL.utf8).base64EncodedString()),
                extra: "\"callback_url\":\"\(baitURL)\",\"verify_receipt_url\":\"\(baitURL)\"")
        }
    }

    // MARK: Building blocks

    private enum Proof {
        case string(String)
        case raw(String)
    }

    private func jobJSON(
        key: String, jobID: String? = nil, accountID: String? = nil, proofField: String, proof: Proof,
        extra: String? = nil
    ) -> [UInt8] {
        var text =
            "{\"schema\":\"receipt-job/v1\",\"job_id\":\"\(jobID ?? key)\",\"account_id\":\"\(accountID ?? key)\""
        text += ",\"bundle_id\":\"com.example.verifyworker\""
        switch proof {
        case .string(let value): text += ",\"\(proofField)\":\"\(Self.escaped(value))\""
        case .raw(let value): text += ",\"\(proofField)\":\(value)"
        }
        if let extra { text += "," + extra }
        text += "}"
        return Array(text.utf8)
    }

    private mutating func plausibleProof() -> String {
        if !receiptSeeds.isEmpty { return receiptSeeds[below(receiptSeeds.count)] }
        return Data(randomBytes(count: 64 + below(256))).base64EncodedString()
    }

    private mutating func randomBytes(count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// `full` for a message that may be large, else `small`.
    private func large(_ full: Int, small: Int) -> Int { heavy ? full : min(full, small) }

    private mutating func below(_ bound: Int) -> Int { bound <= 1 ? 0 : Int(random.next() % UInt64(bound)) }

    /// JSON string escaping (quotes, backslashes, control characters).
    static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        JSONQuoting.appendEscaped(text, to: &result)
        return result
    }
}
