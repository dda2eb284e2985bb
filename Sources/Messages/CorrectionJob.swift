import Foundation

/// The jobs the reconciler publishes when a re-read of a subscription's transaction history finds the ledger behind
/// Apple: a `transaction_id` job for the subscription's owner, whose `job_id` names the
/// transaction and the state Apple stated, so that re-reading an unchanged state publishes the job already decided.
///
/// `reconcile-{transactionId}-{expiresDate ms}-{revocationDate ms}`, 0 for a date Apple does not state.
public enum CorrectionJob {
    /// Prefix of a correction job's `job_id`.
    public static let jobIDPrefix = "reconcile-"

    /// The `job_id` of the correction of `transactionID` in the state Apple stated.
    public static func jobID(transactionID: String, expiresDate: Date?, revocationDate: Date?) -> String {
        "\(jobIDPrefix)\(transactionID)-\(milliseconds(expiresDate))-\(milliseconds(revocationDate))"
    }

    /// The transaction a correction job's `job_id` names; nil when `jobID` is not a correction's.
    public static func transactionID(ofJobID jobID: String) -> String? {
        guard jobID.hasPrefix(jobIDPrefix) else { return nil }
        let parts = jobID.dropFirst(jobIDPrefix.count).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts.suffix(2).allSatisfy({ !$0.isEmpty && Int64($0) != nil }) else { return nil }
        let transactionID = parts.dropLast(2).joined(separator: "-")
        return transactionID.isEmpty ? nil : transactionID
    }

    private static func milliseconds(_ date: Date?) -> Int64 {
        date.map(\.epochMilliseconds) ?? 0
    }
}
