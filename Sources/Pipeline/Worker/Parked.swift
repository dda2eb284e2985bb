import Messages

/// A job parked in one of the worker's stages (``JobStage``): its message (without payload) for the scheduler, and
/// what deciding it needs, with a base64 receipt kept decoded and deflated.
///
/// Thousands of jobs may be parked at once, and a receipt's text was the largest part of each (about 4 KB of the
/// ~8 KB a waiting job cost in `bench pipeline` part e: docs/BENCHMARKS.md, "Memory per waiting job"). Parked, a
/// receipt in canonical base64 (what `base64EncodedString()` gives, as StoreKit apps send it: the standard alphabet,
/// padded, no line breaks) is kept as its decoded bytes, three quarters of its text, deflated against a recent
/// receipt of its kind when that makes it smaller (``ReceiptDeflate``: a half to a tenth of the bytes). The text is
/// made again, the same byte for byte, when a runner takes the job. A receipt in any other form (line breaks,
/// URL-safe letters, no padding) is kept as it came: its text is part of the job's content digest
/// (``ReceiptJob/contentDigest``), and so of its verdict's id.
///
/// A class, so a stage's queue holds a reference per job, not each job's few hundred bytes inline in an array that
/// grows by doubling.
final class Parked<Pending: ParkableJob>: Sendable {
    let admitted: PipelineScheduler.Admitted
    /// The job, its receipt's text left out when `receipt` holds it (never read from outside: ``pending``).
    private let stored: Pending
    /// The receipt, when `stored` does not hold its text.
    private let receipt: PackedReceipt?

    /// A receipt kept out of its job's text.
    private enum PackedReceipt: Sendable {
        /// Decoded from its canonical base64.
        case decoded([UInt8])
        /// Decoded, then deflated.
        case deflated(ReceiptDeflate.Deflated, ReceiptDeflate)
    }

    /// - Parameter deflate: deflates the decoded receipt; nil keeps it decoded only.
    init(admitted: PipelineScheduler.Admitted, pending: Pending, deflate: ReceiptDeflate? = nil) {
        self.admitted = admitted
        var stored = pending
        if let bytes = ProofPacking.pack(&stored.job) {
            receipt =
                deflate.flatMap { deflate in deflate.deflate(bytes).map { .deflated($0, deflate) } }
                ?? .decoded(bytes)
        } else {
            receipt = nil
        }
        self.stored = stored
    }

    /// The job as it was parked, its receipt's text made again (a new string each time: read it once).
    var pending: Pending {
        let bytes: [UInt8]
        switch receipt {
        case nil: return stored
        case .decoded(let decoded): bytes = decoded
        case .deflated(let deflated, let deflate):
            // Inflated once when it was parked; failing now means the process's memory is damaged, and a verdict
            // on a wrong receipt would be worse than a crash (the job is uncommitted, so it is read again).
            guard let inflated = deflate.inflate(deflated) else {
                preconditionFailure("a parked receipt no longer inflates (job \(stored.job.jobID))")
            }
            bytes = inflated
        }
        var pending = stored
        pending.job.proof = .receipt(ProofPacking.text(of: bytes))
        return pending
    }

    /// How the receipt is kept (tests): nil as it came, else decoded, and whether deflated.
    var receiptForm: (decodedBytes: Int, keptBytes: Int)? {
        switch receipt {
        case nil: nil
        case .decoded(let bytes): (bytes.count, bytes.count)
        case .deflated(let deflated, _): (deflated.count, deflated.bytes.count)
        }
    }
}

/// What a job parked in a stage waits with: its job, and what its proof said.
protocol ParkableJob: Sendable {
    var job: ReceiptJob { get set }
}

extension LedgerBoundJob: ParkableJob {}
extension AppleBoundJob: ParkableJob {}

/// A receipt's canonical base64 text and its decoded bytes, one from the other, each in one pass and one allocation.
///
/// Canonical base64 (RFC 4648, section 3.5): the standard alphabet, no line breaks or other characters, padded with
/// `=` to a multiple of four, and the bits the padding leaves over in the last character zero. Exactly one text is
/// canonical for given bytes, the one ``text(of:)`` makes (and Foundation's `base64EncodedString()`), so a text that
/// decodes here is made again the same byte for byte.
enum ProofPacking {
    /// Takes the receipt's text out of `job` and returns its decoded bytes, when the text is canonical base64 (the
    /// proof is left as the empty text); nil, with `job` unchanged, for any other proof.
    static func pack(_ job: inout ReceiptJob) -> [UInt8]? {
        guard case .receipt(let text) = job.proof, let bytes = canonicalBase64Decoded(text) else { return nil }
        job.proof = .receipt("")
        return bytes
    }

    /// The canonical base64 of `bytes`.
    static func text(of bytes: [UInt8]) -> String {
        let length = (bytes.count + 2) / 3 * 4
        return String(unsafeUninitializedCapacity: length) { out in
            bytes.withUnsafeBufferPointer { input in
                var o = 0
                var i = 0
                while i + 3 <= input.count {
                    let group = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    out[o] = alphabet[Int(group >> 18)]
                    out[o + 1] = alphabet[Int(group >> 12 & 63)]
                    out[o + 2] = alphabet[Int(group >> 6 & 63)]
                    out[o + 3] = alphabet[Int(group & 63)]
                    i += 3
                    o += 4
                }
                let left = input.count - i
                if left > 0 {
                    let group = UInt32(input[i]) << 16 | (left == 2 ? UInt32(input[i + 1]) << 8 : 0)
                    out[o] = alphabet[Int(group >> 18)]
                    out[o + 1] = alphabet[Int(group >> 12 & 63)]
                    out[o + 2] = left == 2 ? alphabet[Int(group >> 6 & 63)] : pad
                    out[o + 3] = pad
                }
            }
            return length
        }
    }

    /// The bytes `text` encodes, if `text` is canonical base64 and not empty; nil otherwise.
    static func canonicalBase64Decoded(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { input -> [UInt8]? in
            let n = input.count
            guard n > 0, n % 4 == 0 else { return nil }
            let padding = input[n - 1] != pad ? 0 : input[n - 2] != pad ? 1 : 2
            let count = n / 4 * 3 - padding
            return try? [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
                var o = 0
                var i = 0
                // Every group but the last: four letters of the alphabet.
                while i + 4 < n {
                    let group = try sextets(input, at: i, letters: 4)
                    out[o] = UInt8(truncatingIfNeeded: group >> 16)
                    out[o + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    out[o + 2] = UInt8(truncatingIfNeeded: group)
                    i += 4
                    o += 3
                }
                // The last: its padding, and no bits left over under it.
                let group = try sextets(input, at: i, letters: 4 - padding)
                guard group & (padding == 2 ? 0xFFFF : padding == 1 ? 0xFF : 0) == 0 else { throw NotCanonical() }
                out[o] = UInt8(truncatingIfNeeded: group >> 16)
                if padding < 2 { out[o + 1] = UInt8(truncatingIfNeeded: group >> 8) }
                if padding < 1 { out[o + 2] = UInt8(truncatingIfNeeded: group) }
                initialized = count
            }
        }
    }

    private struct NotCanonical: Error {}

    /// The 24 bits of the group at `start`, of which the first `letters` letters are read (the rest count as zero).
    private static func sextets(_ input: UnsafeBufferPointer<UInt8>, at start: Int, letters: Int) throws -> UInt32 {
        var group: UInt32 = 0
        for k in 0..<4 {
            var value: UInt8 = 0
            if k < letters {
                value = decoding[Int(input[start + k])]
                guard value < 64 else { throw NotCanonical() }
            }
            group = group << 6 | UInt32(value)
        }
        return group
    }

    private static let pad = UInt8(ascii: "=")
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    /// Each byte's value as a base64 letter, or 255 for a byte that is none (`=` too: it is read only at the end).
    private static let decoding: [UInt8] = {
        var table = [UInt8](repeating: 255, count: 256)
        for (value, letter) in alphabet.enumerated() { table[Int(letter)] = UInt8(value) }
        return table
    }()
}
