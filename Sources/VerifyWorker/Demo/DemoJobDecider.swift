import AppleClients
import Foundation
import Messages
import RateLimiter
import Receipts
import Synchronization

/// Which account owns which transaction, for one demo run.
///
/// A stand-in for the Ledger (issue 7), which replaces it: in memory, one process, gone when the run ends. It
/// exists so the demo can show repeats and replays decided without asking Apple.
final class DemoClaims: Sendable {
    /// What claiming a receipt's transactions for an account gives.
    enum Result: Sendable, Equatable {
        /// New to this account (or the same job again, redelivered: the same answer as the first time).
        case granted
        /// This account already owns every transaction, from an earlier job.
        case alreadyGranted
        /// Another account owns one of them: nothing is claimed.
        case replayed
    }

    private struct Owner: Sendable {
        var accountID: String
        var jobID: String
    }

    private let owners = Mutex<[String: Owner]>([:])

    /// What claiming would give, without claiming (to skip Apple for known transactions).
    func peek(_ transactionIDs: [String], accountID: String, jobID: String) -> Result? {
        owners.withLock { owners in
            let known = transactionIDs.compactMap { owners[$0] }
            guard !transactionIDs.isEmpty,
                known.count == transactionIDs.count
                    || known.contains(where: {
                        $0.accountID != accountID
                    })
            else { return nil }
            return Self.result(known, accountID: accountID, jobID: jobID)
        }
    }

    /// Claims every transaction for the account, all or nothing.
    func claim(_ transactionIDs: [String], accountID: String, jobID: String) -> Result {
        owners.withLock { owners in
            let known = transactionIDs.compactMap { owners[$0] }
            if known.contains(where: { $0.accountID != accountID }) { return .replayed }
            for id in transactionIDs where owners[id] == nil {
                owners[id] = Owner(accountID: accountID, jobID: jobID)
            }
            return known.count == transactionIDs.count
                ? Self.result(known, accountID: accountID, jobID: jobID) : .granted
        }
    }

    private static func result(_ known: [Owner], accountID: String, jobID: String) -> Result {
        if known.contains(where: { $0.accountID != accountID }) { return .replayed }
        return known.allSatisfy { $0.jobID == jobID } ? .granted : .alreadyGranted
    }
}

/// Asks Apple's `verifyReceipt` through the worker's call gate, retrying what Apple throttles until the job's
/// deadline.
struct DemoAppleVerifier: Sendable {
    /// What came of asking Apple.
    enum Result: Sendable {
        case answered(VerifyReceiptResponse)
        /// Apple could not be asked or kept refusing until the deadline.
        case unavailable
    }

    let gate: AppleCallGate<ContinuousClock>
    let client: VerifyReceiptClient
    /// How long one job may keep trying Apple.
    let deadline: Duration
    let clock = ContinuousClock()

    func verify(receipt: String, startingAt environment: AppleEnvironment) async -> Result {
        let deadline = clock.now.advanced(by: deadline)
        var priority = CallPriority.firstAttempt
        while clock.now < deadline {
            guard let permit = try? await gate.acquire(.verifyReceipt, priority: priority, deadline: deadline) else {
                return .unavailable
            }
            let started = clock.now
            let outcome: AppleOutcome<VerifyReceiptResponse>
            do {
                outcome = try await client.verify(receiptData: receipt, startingAt: environment)
            } catch {
                gate.report(permit, .notSent)
                return .unavailable
            }
            switch outcome {
            case .answered(let response):
                gate.report(permit, .success(latency: started.duration(to: clock.now)))
                return .answered(response)
            case .retryable(let advice):
                gate.report(permit, Self.callOutcome(advice))
                priority = .retry
            case .failed:
                gate.report(permit, .failure)
                return .unavailable
            }
        }
        return .unavailable
    }

    /// How the gate should count a retryable answer: overload signals slow it down, other failures do not.
    static func callOutcome(_ advice: AppleRetryAdvice) -> CallOutcome {
        switch advice.reason {
        case .receiptStatus(21005), .httpStatus(503), .httpStatus(429):
            .throttled(retryAfter: advice.retryAfter)
        case .transport(let code) where code == .timeout:
            .timeout
        default:
            .failure
        }
    }
}

/// Decides one job: local analysis first, the claims for repeats, Apple only for receipts whose state Apple holds.
///
/// A simplified stand-in for the Pipeline's decision stage (issue 7): the outcomes and reasons are the contract's,
/// but without the Ledger's durable claims.
struct DemoJobDecider: Sendable {
    let analyzer: ReceiptAnalyzer
    let apple: DemoAppleVerifier
    let claims: DemoClaims

    func decide(_ job: ReceiptJob) async -> Verdict {
        let proof: String
        switch job.proof {
        case .receipt(let text), .signedTransaction(let text), .notification(let text):
            proof = text
        case .transactionID:
            return verdict(job, .unverifiable, Verdict.Reason("unsupported_proof"), by: .prefilter)
        }
        let analysis = analyzer.analyze(Array(proof.utf8))
        switch analysis.verdict {
        case .malformed:
            return verdict(job, .rejected, .malformed, by: .prefilter)
        case .wrongBundle:
            return verdict(job, .rejected, .wrongBundle, by: .prefilter, analysis)
        case .unknownProduct:
            return verdict(job, .rejected, .unknownProduct, by: .prefilter, analysis)
        case .environmentNotAllowed:
            return verdict(job, .rejected, .environmentNotAllowed, by: .prefilter, analysis)
        case .notAuthenticated:
            return verdict(job, .rejected, .notAuthenticated, by: .signature, analysis)
        case .locallyVerified:
            return grant(job, analysis.transactions.map(Self.transaction), by: .signature, analysis)
        case .needsApple:
            let local = analysis.transactions.map(\.transactionID)
            if let known = claims.peek(local, accountID: job.accountID, jobID: job.jobID), known != .granted {
                return claimed(job, known, analysis.transactions.map(Self.transaction), by: .ledger, analysis)
            }
            let environment: AppleEnvironment = analysis.environment == .sandbox ? .sandbox : .production
            return await askApple(job, receipt: proof, environment: environment, analysis)
        }
    }

    private func askApple(
        _ job: ReceiptJob, receipt: String, environment: AppleEnvironment, _ analysis: ReceiptAnalysis
    ) async -> Verdict {
        guard case .answered(let response) = await apple.verify(receipt: receipt, startingAt: environment) else {
            return verdict(job, .unverifiable, .appleUnavailable, by: .apple, analysis)
        }
        var result = verdictFromApple(job, response, analysis)
        result.appleStatus = response.status.code
        result.environment = response.environment.rawValue
        return result
    }

    private func verdictFromApple(
        _ job: ReceiptJob, _ response: VerifyReceiptResponse, _ analysis: ReceiptAnalysis
    )
        -> Verdict
    {
        switch response.status {
        case .valid:
            let purchases = (response.receipt?.inApp ?? []) + response.latestReceiptInfo
            var seen = Set<String>()
            let transactions = purchases.filter { seen.insert($0.transactionID).inserted }.map(Self.transaction)
            return grant(job, transactions, by: .apple, analysis)
        case .receiptNotAuthenticated, .malformedReceiptData:
            return verdict(job, .rejected, .notAuthenticated, by: .apple, analysis)
        case .subscriptionExpired:
            return verdict(job, .rejected, .expired, by: .apple, analysis)
        default:
            return verdict(job, .rejected, .appleRejected, by: .apple, analysis)
        }
    }

    /// Grants authentic purchases, unless revoked, expired or owned by another account.
    private func grant(
        _ job: ReceiptJob, _ transactions: [Verdict.Transaction], by stage: Verdict.DecidedBy,
        _ analysis: ReceiptAnalysis
    ) -> Verdict {
        guard !transactions.isEmpty else { return verdict(job, .rejected, .noTransaction, by: stage, analysis) }
        if transactions.contains(where: { $0.revokedAt != nil }) {
            return verdict(job, .rejected, .revoked, by: stage, analysis, transactions)
        }
        let now = Date()
        if transactions.allSatisfy({ ($0.expiresDate ?? .distantFuture) < now }) {
            return verdict(job, .rejected, .expired, by: stage, analysis, transactions)
        }
        let result = claims.claim(transactions.map(\.transactionID), accountID: job.accountID, jobID: job.jobID)
        return claimed(job, result, transactions, by: stage, analysis)
    }

    private func claimed(
        _ job: ReceiptJob, _ result: DemoClaims.Result, _ transactions: [Verdict.Transaction],
        by stage: Verdict.DecidedBy, _ analysis: ReceiptAnalysis
    ) -> Verdict {
        switch result {
        case .granted: verdict(job, .granted, nil, by: stage, analysis, transactions)
        case .alreadyGranted: verdict(job, .alreadyGranted, .alreadyOwned, by: .ledger, analysis, transactions)
        case .replayed: verdict(job, .rejected, .replayed, by: .ledger, analysis)
        }
    }

    private func verdict(
        _ job: ReceiptJob, _ outcome: Verdict.Outcome, _ reason: Verdict.Reason?, by stage: Verdict.DecidedBy,
        _ analysis: ReceiptAnalysis? = nil, _ transactions: [Verdict.Transaction] = []
    ) -> Verdict {
        Verdict(
            jobID: job.jobID, accountID: job.accountID, outcome: outcome, reason: reason, decidedBy: stage,
            environment: analysis?.environment?.rawValue, transactions: transactions, decidedAt: Date())
    }

    private static func transaction(_ local: Receipts.ReceiptTransaction) -> Verdict.Transaction {
        Verdict.Transaction(
            transactionID: local.transactionID, originalTransactionID: local.originalTransactionID,
            productID: local.productID ?? "", purchaseDate: local.purchaseDate, expiresDate: local.expiresDate,
            revokedAt: local.revocationDate ?? local.cancellationDate, quantity: local.quantity)
    }

    private static func transaction(_ apple: AppleClients.ReceiptTransaction) -> Verdict.Transaction {
        Verdict.Transaction(
            transactionID: apple.transactionID, originalTransactionID: apple.originalTransactionID,
            productID: apple.productID, purchaseDate: apple.purchaseDate, expiresDate: apple.expiresDate,
            revokedAt: apple.cancellationDate, quantity: apple.quantity)
    }
}
