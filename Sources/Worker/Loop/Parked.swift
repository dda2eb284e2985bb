import Foundation
import Messages
import Receipts

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
    let admitted: WorkerScheduler.Admitted
    /// The job, its receipt's text left out when `receipt` holds it (never read from outside: ``pending``).
    private let stored: Pending
    /// The receipt, when `stored` does not hold its text.
    private let receipt: ParkedReceipt?

    /// - Parameter deflate: deflates the decoded receipt; nil keeps it decoded only.
    convenience init(admitted: WorkerScheduler.Admitted, pending: Pending, deflate: ReceiptDeflate? = nil) {
        var stored = pending
        var receipt: ParkedReceipt?
        if let bytes = ProofPacking.pack(&stored.job) {
            receipt =
                deflate.flatMap { deflate in deflate.deflate(bytes).map { .deflated($0, deflate) } }
                ?? .decoded(bytes)
        }
        self.init(admitted: admitted, stored: stored, receipt: receipt)
    }

    private init(admitted: WorkerScheduler.Admitted, stored: Pending, receipt: ParkedReceipt?) {
        self.admitted = admitted
        self.stored = stored
        self.receipt = receipt
    }

    /// `next`, parked for the next stage, keeping this job's receipt as it is kept (not decoded and deflated again),
    /// if its job is `given` (what ``pending`` gave the step) unchanged; nil otherwise.
    func parkedAgain<Next: ParkableJob>(_ next: Next, given: ReceiptJob) -> Parked<Next>? {
        guard let receipt, next.job == given else { return nil }
        var stored = next
        stored.job.proof = .receipt("")
        return Parked<Next>(admitted: admitted, stored: stored, receipt: receipt)
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

/// A parked job's receipt, kept out of its job's text (the same for every stage's ``Parked``).
private enum ParkedReceipt: Sendable {
    /// Decoded from its canonical base64.
    case decoded([UInt8])
    /// Decoded, then deflated.
    case deflated(ReceiptDeflate.Deflated, ReceiptDeflate)
}

/// What a job parked in a stage waits with: its job, and what its proof said.
protocol ParkableJob: Sendable {
    var job: ReceiptJob { get set }
}

extension LedgerBoundJob: ParkableJob {}
extension StoreBoundJob: ParkableJob {}

/// A receipt's canonical base64 text and its decoded bytes, one from the other.
///
/// Canonical base64 (RFC 4648, section 3.5): the standard alphabet, no line breaks or other characters, padded with
/// `=` to a multiple of four, and the bits the padding leaves over in the last character zero. Exactly one text is
/// canonical for given bytes, the one Foundation's `base64EncodedString()` makes (``text(of:)``), so a text that
/// decodes here is made again the same byte for byte. The decoding itself is the receipt reader's (``Base64``): the
/// check here only refuses the forms that reader forgives.
enum ProofPacking {
    /// Takes the receipt's text out of `job` and returns its decoded bytes, when the text is canonical base64 (the
    /// proof is left as the empty text); nil, with `job` unchanged, for any other proof.
    static func pack(_ job: inout ReceiptJob) -> [UInt8]? {
        guard case .receipt(let text) = job.proof, let bytes = canonicalBase64Decoded(text) else { return nil }
        job.proof = .receipt("")
        return bytes
    }

    /// The canonical base64 of `bytes` (as verifyReceipt's `receipt-data` is made: ``AppStore/appleBound(_:)``).
    static func text(of bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// The bytes `text` encodes, if `text` is canonical base64 and not empty; nil otherwise.
    static func canonicalBase64Decoded(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { input -> [UInt8]? in
            let count = input.count
            guard count > 0, count % 4 == 0 else { return nil }
            let pad = UInt8(ascii: "=")
            let padding = input[count - 1] != pad ? 0 : input[count - 2] != pad ? 1 : 2
            var last: UInt8 = 0
            for byte in input[..<(count - padding)] {
                guard let value = standardValue(of: byte) else { return nil }
                last = value
            }
            // No bits left over under the padding: two of the last letter before one `=`, four before two.
            guard last & (padding == 2 ? 0x0F : padding == 1 ? 0x03 : 0) == 0 else { return nil }
            return Base64.decode(input)
        }
    }

    /// The 6-bit value of a letter of the standard alphabet (not the URL-safe `-` and `_`, nor `=`), or nil.
    private static func standardValue(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
