import Foundation
import Messages

/// A job parked in one of the worker's stages (``JobStage``): its message (without payload) for the scheduler, and
/// what deciding it needs, with a base64 receipt kept decoded.
///
/// Thousands of jobs may be parked at once, and a receipt's text was the largest part of each (about 3 KB of the
/// ~8 KB a waiting job cost: docs/BENCHMARKS.md, "Memory per waiting job"). Parked, a receipt in canonical base64
/// (what `base64EncodedString()` gives, as StoreKit apps send it: the standard alphabet, padded, no line breaks) is
/// kept as its decoded bytes, three quarters of its text; the text is made again, the same byte for byte, when a
/// runner takes the job. A receipt in any other form (line breaks, URL-safe letters, no padding) is kept as it came:
/// its text is part of the job's content digest (``ReceiptJob/contentDigest``), and so of its verdict's id.
///
/// A class, so a stage's queue holds a reference per job, not each job's few hundred bytes inline in an array that
/// grows by doubling.
final class Parked<Pending: ParkableJob>: Sendable {
    let admitted: PipelineScheduler.Admitted
    /// The job, its receipt's text left out when `receipt` holds it (never read from outside: ``pending``).
    private let stored: Pending
    /// The receipt's bytes, decoded from its canonical base64; nil: `stored` is the job as it came.
    private let receipt: [UInt8]?

    init(admitted: PipelineScheduler.Admitted, pending: Pending) {
        self.admitted = admitted
        var stored = pending
        receipt = ProofPacking.pack(&stored.job)
        self.stored = stored
    }

    /// The job as it was parked, its receipt's text made again (a new string each time: read it once).
    var pending: Pending {
        guard let receipt else { return stored }
        var pending = stored
        pending.job.proof = .receipt(ProofPacking.text(of: receipt))
        return pending
    }

    /// Whether the receipt is kept decoded (tests).
    var isPacked: Bool { receipt != nil }
}

/// What a job parked in a stage waits with: its job, and what its proof said.
protocol ParkableJob: Sendable {
    var job: ReceiptJob { get set }
}

extension LedgerBoundJob: ParkableJob {}
extension AppleBoundJob: ParkableJob {}

/// A receipt's canonical base64 text and its decoded bytes, one from the other.
enum ProofPacking {
    /// Takes the receipt's text out of `job` and returns its decoded bytes, when the text is canonical base64 (the
    /// proof is left as the empty text); nil, with `job` unchanged, for any other proof.
    static func pack(_ job: inout ReceiptJob) -> [UInt8]? {
        guard case .receipt(let text) = job.proof, let bytes = canonicalBase64Decoded(text) else { return nil }
        job.proof = .receipt("")
        return bytes
    }

    /// The canonical base64 of `bytes`.
    static func text(of bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    /// The bytes `text` encodes, if `text` is exactly what ``text(of:)`` makes of them; nil otherwise.
    static func canonicalBase64Decoded(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, let data = Data(base64Encoded: text) else { return nil }
        let bytes = [UInt8](data)
        return Self.text(of: bytes) == text ? bytes : nil
    }
}
