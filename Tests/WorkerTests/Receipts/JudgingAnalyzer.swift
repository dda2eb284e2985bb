import Decision
import Foundation
import Messages
import Receipts

/// A receipt read as the worker reads it: the analyzer's facts and Decision's judgement of them (the receipt suites
/// assert both).
@dynamicMemberLookup
struct JudgedAnalysis: Sendable {
    var analysis: ReceiptAnalysis
    var judgement: ProofJudgement

    subscript<Value>(dynamicMember path: KeyPath<ReceiptAnalysis, Value>) -> Value { analysis[keyPath: path] }

    /// The evidence the worker hands the rules.
    var evidence: PurchaseEvidence { EvidenceMapping.evidence(from: analysis.facts, judgement: judgement) }
}

/// ``ReceiptAnalyzer`` with the worker's judgement of what it reads (``ProofPolicy``): the analyzer skips the
/// signature check of receipts the policy rejects by their bundle, as the worker's does.
@dynamicMemberLookup
struct JudgingAnalyzer: Sendable {
    let analyzer: ReceiptAnalyzer
    let judging: ProofPolicy

    init(
        trust: TrustStore = .apple, catalog: Catalog = .any, policy: AnalysisPolicy = AnalysisPolicy(),
        allowedEnvironments: Set<AppleEnvironment> = [.production, .sandbox]
    ) {
        judging = ProofPolicy(catalog: catalog, allowedEnvironments: allowedEnvironments, allowXcode: policy.allowXcode)
        analyzer = ReceiptAnalyzer(trust: trust, policy: policy, isWorthVerifying: judging.isWorthVerifying(bundleID:))
    }

    subscript<Value>(dynamicMember path: KeyPath<ReceiptAnalyzer, Value>) -> Value { analyzer[keyPath: path] }

    func analyze(_ input: [UInt8], at time: Date? = nil) -> JudgedAnalysis {
        judged(analyzer.analyze(input, at: time))
    }

    func analyzeWithoutVerifying(_ input: [UInt8]) -> JudgedAnalysis {
        judged(analyzer.analyzeWithoutVerifying(input))
    }

    private func judged(_ analysis: ReceiptAnalysis) -> JudgedAnalysis {
        JudgedAnalysis(analysis: analysis, judgement: judging.judge(analysis.facts))
    }
}
