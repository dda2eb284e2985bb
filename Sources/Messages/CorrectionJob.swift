import Foundation

/// The jobs the reconciler publishes when a re-read of a subscription's transaction history finds the ledger behind
/// Apple: a `transaction_id` job for the subscription's owner, whose `job_id` names the
/// transaction and the state Apple stated, so that re-reading an unchanged state publishes the job already decided.
///
/// `reconcile-{transactionId}-{expiresDate ms}-{revocationDate ms}`, 0 for a date Apple does not state.
///
/// A refund Apple reversed (the ledger holds the claim revoked, Apple states no revocation) is a reversal correction,
/// `reconcile-reversal-{the ledger's revoked_at ms}-{transactionId}-{expiresDate ms}-0`: the workers restore the claim
/// for its owner as a `REFUND_REVERSED` would, which they never do from a transaction's state alone. The reversed
/// revocation is in the id because the same state (not revoked, same expiry) may have been corrected before the refund.
public enum CorrectionJob {
    /// Prefix of a correction job's `job_id`.
    public static let jobIDPrefix = "reconcile-"
    /// Prefix of a reversal correction's `job_id`.
    public static let reversalPrefix = jobIDPrefix + "reversal-"

    /// The `job_id` of the correction of `transactionID` in the state Apple stated.
    public static func jobID(transactionID: String, expiresDate: Date?, revocationDate: Date?) -> String {
        "\(jobIDPrefix)\(transactionID)-\(milliseconds(expiresDate))-\(milliseconds(revocationDate))"
    }

    /// The `job_id` of the correction that restores `transactionID`, whose refund (the ledger's `revoked_at`,
    /// `reversedRevocation`) Apple reversed.
    public static func reversalJobID(transactionID: String, expiresDate: Date?, reversedRevocation: Date?) -> String {
        "\(reversalPrefix)\(milliseconds(reversedRevocation))-"
            + jobID(transactionID: transactionID, expiresDate: expiresDate, revocationDate: nil)
            .dropFirst(jobIDPrefix.count)
    }

    /// Whether `jobID` is a reversal correction's.
    public static func isReversal(jobID: String) -> Bool {
        transactionID(ofJobID: jobID) != nil && jobID.hasPrefix(reversalPrefix)
    }

    /// The transaction a correction job's `job_id` names; nil when `jobID` is not a correction's.
    public static func transactionID(ofJobID jobID: String) -> String? {
        guard jobID.hasPrefix(jobIDPrefix) else { return nil }
        var rest = jobID.dropFirst(jobIDPrefix.count)
        if jobID.hasPrefix(reversalPrefix) {
            let afterPrefix = jobID.dropFirst(reversalPrefix.count)
            guard let dash = afterPrefix.firstIndex(of: "-"), Int64(afterPrefix[..<dash]) != nil else { return nil }
            rest = afterPrefix[afterPrefix.index(after: dash)...]
        }
        let parts = rest.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts.suffix(2).allSatisfy({ !$0.isEmpty && Int64($0) != nil }) else { return nil }
        let transactionID = parts.dropLast(2).joined(separator: "-")
        return transactionID.isEmpty ? nil : transactionID
    }

    private static func milliseconds(_ date: Date?) -> Int64 {
        date.map(\.epochMilliseconds) ?? 0
    }
}
