import Foundation
import Messages

/// Turns what a store adapter reported (``ProofFacts`` read locally, a ``StoreAnswer``) into ``PurchaseEvidence``,
/// the one model the decision rules read. Pure functions: no I/O.
public enum EvidenceMapping {
    // MARK: A proof read locally

    /// The evidence of a proof's facts, judged under `policy` (``ProofPolicy/judge(_:)``). Rejections found locally
    /// are final; a valid JWS is authentic; a receipt whose state the store holds is `unknown` (the ledger may still
    /// decide it: a repeat, a replay).
    public static func evidence(from facts: ProofFacts, policy: ProofPolicy) -> PurchaseEvidence {
        evidence(from: facts, judgement: policy.judge(facts))
    }

    /// The evidence of a proof's facts and their judgement.
    public static func evidence(from facts: ProofFacts, judgement: ProofJudgement) -> PurchaseEvidence {
        var evidence = PurchaseEvidence(
            source: .prefilter, authenticity: .unknown,
            environment: environment(facts.environment, unrecognized: facts.unrecognizedEnvironment),
            bundleID: facts.bundleID, transactions: facts.transactions, store: facts.store)
        evidence.rejection = judgement.rejection
        switch judgement {
        case .notAuthenticated:
            evidence.source = .signature
            evidence.authenticity = .notAuthenticated
        case .locallyVerified:
            evidence.source = .signature
            evidence.authenticity = .authentic
            if let notification = facts.notification {
                evidence.notification = subscriptionNotification(notification, signedDate: facts.signedDate)
            }
        case .malformed, .wrongBundle, .unknownProduct, .productMismatch, .environmentNotAllowed, .needsApple:
            break
        }
        return evidence
    }

    /// What a verified notification says, for the rules (``NotificationTable``).
    static func subscriptionNotification(
        _ notification: ProofFacts.Notification, signedDate: Date?
    ) -> SubscriptionNotification {
        SubscriptionNotification(
            kind: NotificationTable.kind(ofNotificationType: notification.type, subtype: notification.subtype),
            appleType: notification.type, subtype: notification.subtype, signedDate: signedDate,
            autoRenew: NotificationTable.autoRenew(
                subtype: notification.subtype, renewalAutoRenews: notification.renewalAutoRenews),
            appAppleID: notification.appAppleID)
    }

    /// The environment the rules see: StoreKit testing and local testing are both `xcode` (never production), and
    /// a name the store does not have counts as sandbox.
    static func environment(_ environment: AppleEnvironment?, unrecognized: String? = nil) -> AppleEnvironment? {
        switch environment {
        case .none: unrecognized == nil ? nil : .sandbox
        case .some(.production): .production
        case .some(.sandbox): .sandbox
        case .some(.xcode), .some(.localTesting): .xcode
        }
    }

    // MARK: The store's answer

    /// The evidence of the store's answer. Statuses that describe our side (a wrong shared secret, a request the
    /// store could not read) make the evidence `appleUnavailable` rather than rejecting a customer's purchase for an
    /// operator's mistake.
    ///
    /// - Parameter local: the evidence read locally; its bundle id stands when the answer names none.
    public static func evidence(from answer: StoreAnswer, local: PurchaseEvidence) -> PurchaseEvidence {
        var evidence = PurchaseEvidence(
            source: .apple, authenticity: .unknown, environment: environment(answer.environment),
            bundleID: answer.bundleID ?? local.bundleID,
            // `apple_status` is Apple's alone: a Google Play verdict carries no status.
            appleStatus: local.store == .appStore ? answer.statusCode : nil, store: local.store)
        switch answer.status {
        case .authentic:
            evidence.authenticity = .authentic
            evidence.transactions = answer.transactions
        case .notAuthenticated:
            evidence.authenticity = .notAuthenticated
        case .unreadableProof:
            evidence.rejection = .malformed
        case .refusedRequest:
            evidence = local
            evidence.appleUnavailable = true
            evidence.appleStatus = local.store == .appStore ? answer.statusCode : nil
        case .rejected:
            evidence.rejection = local.store.rejectedReason
        case .notFound:
            evidence.rejection = .purchaseNotFound
        case .pending:
            evidence.rejection = .purchasePending
        }
        return evidence
    }

    /// The evidence of a transaction the store looked up (its signature already verified by the client).
    public static func evidence(from answer: StoreAnswer) -> PurchaseEvidence {
        evidence(from: answer, local: PurchaseEvidence(source: .apple, authenticity: .unknown))
    }
}
