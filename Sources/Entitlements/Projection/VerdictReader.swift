import Foundation
import Messages

/// Turns a record of the verdicts topic into a ``ProjectionInput``: a verdict this build understands, or an
/// ``UnreadableMessage`` with what could be read of its envelope. It never throws and never guesses: a message
/// of an unknown schema or outcome is reported, not interpreted.
public struct VerdictReader: Sendable {
    public let codec: MessageCodec

    public init(maximumMessageBytes: Int = 1 << 20) {
        codec = MessageCodec(maximumMessageBytes: maximumMessageBytes)
    }

    /// - Parameter position: the record's place (`topic/partition/offset`), the de-duplication id of a message
    ///   without a readable `verdict_id`.
    public func read(_ bytes: [UInt8], position: String) -> ProjectionInput {
        let verdict: Verdict
        do {
            verdict = try codec.decodeVerdict(bytes)
        } catch {
            return .unreadable(envelope(bytes, position: position, error: error))
        }
        if let problem = Self.invalidIdentifier(in: verdict) {
            return .unreadable(
                UnreadableMessage(
                    dedupeID: Identifier.isValid(verdict.verdictID) ? verdict.verdictID : position,
                    accountID: Identifier.isValid(verdict.accountID) ? verdict.accountID : nil,
                    verdictID: Identifier.isValid(verdict.verdictID) ? verdict.verdictID : nil,
                    schema: Verdict.schema, outcome: verdict.outcome.rawValue, code: "invalid_identifier",
                    problem: problem))
        }
        return .verdict(verdict, revocations: Self.revocations(of: verdict))
    }

    /// The revocation detail the verdict's transactions state (``TransactionRevocation``); a percentage out of range
    /// (outside 0...100000) was left out when the verdict was read, and a type that is no identifier is left out here.
    static func revocations(of verdict: Verdict) -> [TransactionRevocation] {
        verdict.transactions.compactMap { item in
            guard let revocation = item.revocation else { return nil }
            let type = revocation.type.map(\.rawValue).flatMap { Identifier.isValid($0) ? $0 : nil }
            let reason = revocation.reason.map(String.init)
            guard type != nil || revocation.percentage != nil || reason != nil else { return nil }
            return TransactionRevocation(
                transactionID: item.transactionID, type: type, percentage: revocation.percentage, reason: reason)
        }
    }

    /// The first identifier that breaks the contract's bounds (1 to 256 bytes, no control characters), named.
    static func invalidIdentifier(in verdict: Verdict) -> String? {
        if !Identifier.isValid(verdict.verdictID) { return "verdict_id is empty, too long or has control characters" }
        if !Identifier.isValid(verdict.accountID) { return "account_id is empty, too long or has control characters" }
        if !Identifier.isValid(verdict.jobID) { return "job_id is empty, too long or has control characters" }
        for (index, transaction) in verdict.transactions.enumerated() {
            if !Identifier.isValid(transaction.transactionID) {
                return "transactions[\(index)].transaction_id is empty, too long or has control characters"
            }
            if !Identifier.isValid(transaction.productID) {
                return "transactions[\(index)].product_id is empty, too long or has control characters"
            }
            if let original = transaction.originalTransactionID, !Identifier.isValid(original) {
                return "transactions[\(index)].original_transaction_id is empty, too long or has control characters"
            }
        }
        if let reason = verdict.reason?.rawValue, !Identifier.isValid(reason) { return "reason is not a code" }
        return nil
    }

    private func envelope(_ bytes: [UInt8], position: String, error: MessageError) -> UnreadableMessage {
        let object =
            bytes.count <= codec.maximumMessageBytes
            ? (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] : nil
        func identifier(_ key: String) -> String? {
            guard let text = object?[key] as? String, Identifier.isValid(text) else { return nil }
            return text
        }
        let schema = identifier("schema")
        let outcome = identifier("outcome")
        let verdictID = identifier("verdict_id")
        let code: String
        let problem: String
        switch error.code {
        case .oversized:
            code = "oversized"
            problem = "larger than \(codec.maximumMessageBytes) bytes"
        case .notJSON:
            code = "not_json"
            problem = "not a JSON object"
        case .unsupportedSchema:
            code = "unsupported_schema"
            problem = "schema is not \(Verdict.schema)"
        default:
            if let outcome, Verdict.Outcome(rawValue: outcome) == nil, schema == Verdict.schema {
                code = "unknown_outcome"
                problem = "outcome is not one this build knows (granted, already_granted, rejected, unverifiable)"
            } else {
                code = "invalid_verdict"
                problem = "\(error.code.rawValue)\(error.field.map { " at \($0)" } ?? "")"
            }
        }
        return UnreadableMessage(
            dedupeID: verdictID ?? position, accountID: identifier("account_id"), verdictID: verdictID,
            schema: schema, outcome: outcome, code: code, problem: problem)
    }
}
