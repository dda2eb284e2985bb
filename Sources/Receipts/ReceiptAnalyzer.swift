import Foundation
import Messages

/// Decodes any Apple receipt format, verifies its signature offline and reports what it says: facts only, judged
/// by Decision (`ProofPolicy`).
///
/// One analyzer serves any number of concurrent callers: its only state is the cache of verified chains.
/// ```swift
/// let analyzer = ReceiptAnalyzer(trust: .apple, isWorthVerifying: proofPolicy.isWorthVerifying(bundleID:))
/// let analysis = analyzer.analyze(bytes)          // validated at the receipt's own signing date
/// ```
public final class ReceiptAnalyzer: Sendable {
    public let trust: TrustStore
    public let policy: AnalysisPolicy
    /// The chain verifier and its cache (exposed for the benchmark's cold and warm cases).
    public let chains: ChainVerifier
    /// Whether a receipt naming a bundle id is worth its signature check (Decision's rule: one the judgement rejects
    /// for its bundle whatever its signature is not checked). Default: every receipt.
    let isWorthVerifying: @Sendable (String?) -> Bool

    public init(
        trust: TrustStore = .apple, policy: AnalysisPolicy = AnalysisPolicy(),
        isWorthVerifying: @escaping @Sendable (String?) -> Bool = { _ in true }
    ) {
        self.trust = trust
        self.policy = policy
        self.isWorthVerifying = isWorthVerifying
        self.chains = ChainVerifier(trust: trust, requireAppleMarkerOIDs: policy.requireAppleMarkerOIDs)
    }

    /// Analyzes one receipt as received (raw bytes, base64 text or JWS text).
    ///
    /// - Parameter time: when to validate the certificate chain. Nil (the default) means at the receipt's own
    ///   signing time (creation date, `signedDate` or purchase date), because every historical Apple leaf has
    ///   expired since; only a receipt without any such date is validated at the current time.
    public func analyze(_ input: [UInt8], at time: Date? = nil) -> ReceiptAnalysis {
        decodeAndVerify(input, at: time, verify: true)
    }

    /// Decodes and parses one receipt fully (every field and transaction), but checks no signature: `signature` is
    /// `notChecked`, so a JWS is never `locallyVerified` and an app or iOS 6 receipt always needs Apple. For
    /// inspection and for measuring the parser alone; a worker's decisions come from `analyze`.
    public func analyzeWithoutVerifying(_ input: [UInt8]) -> ReceiptAnalysis {
        decodeAndVerify(input, at: nil, verify: false)
    }

    private static let parseOnly = SignatureStatus.notChecked(reason: "parsed without verifying the signature")
    private static let otherApp = SignatureStatus.notChecked(
        reason: "another app's receipt (bundle id not in the catalog): signature not checked")

    private func signatureStatus(
        verify: Bool, bundleID: String?, _ check: () -> SignatureStatus
    ) -> SignatureStatus {
        guard verify else { return Self.parseOnly }
        guard isWorthVerifying(bundleID) else { return Self.otherApp }
        return check()
    }

    private func decodeAndVerify(_ input: [UInt8], at time: Date?, verify: Bool) -> ReceiptAnalysis {
        let bytes: [UInt8]
        do {
            bytes = try ReceiptInput.normalize(input, maximumDecodedSize: policy.maximumDecodedSize)
        } catch {
            return .unknown(error.description)
        }
        if ReceiptInput.isJWSText(bytes[...]) {
            return analyzeJWS(bytes, at: time, nested: false, verify: verify)
        }
        if AppReceipt.looksLikePKCS7(bytes) {
            return analyzeAppReceipt(bytes, at: time, verify: verify)
        }
        if TransactionReceipt.looksLikeTransactionReceipt(bytes) {
            return analyzeTransactionReceipt(bytes, at: time, verify: verify)
        }
        return .unknown(Self.describeUnknown(bytes))
    }

    private func analyzeAppReceipt(_ bytes: [UInt8], at time: Date?, verify: Bool) -> ReceiptAnalysis {
        let receipt: AppReceipt
        do {
            receipt = try AppReceipt(bytes: bytes)
        } catch let error as BERError {
            return .unknown("PKCS#7 structure is broken: \(error)")
        } catch {
            return .unknown("PKCS#7 structure is broken")
        }
        let validationTime = time ?? receipt.creationDate ?? Date()
        var signature = signatureStatus(verify: verify, bundleID: receipt.bundleID) {
            chains.checkSignature(of: receipt, at: validationTime)
        }
        // Xcode signs its StoreKit-testing receipts with a certificate of its own that no anchor can reach: allowed,
        // such a receipt is reported as not checked (as an Xcode JWS is), not as an untrusted one.
        if policy.allowXcode, receipt.environment == AppleEnvironment.xcode.rawValue, case .untrusted = signature {
            signature = .notChecked(reason: "Xcode StoreKit-testing receipt: chain not anchored")
        }
        return ReceiptAnalysis(
            format: .appReceipt, environmentName: receipt.environment, bundleID: receipt.bundleID,
            signature: signature,
            signedDate: receipt.creationDate, appVersion: receipt.appVersion,
            originalAppVersion: receipt.originalAppVersion, transactions: receipt.transactions)
    }

    private func analyzeTransactionReceipt(_ bytes: [UInt8], at time: Date?, verify: Bool) -> ReceiptAnalysis {
        let receipt: TransactionReceipt
        do {
            receipt = try TransactionReceipt(bytes: bytes)
        } catch {
            return .unknown("OpenStep text is not a transaction receipt: \(error.reason)")
        }
        let validationTime = time ?? receipt.purchaseDate ?? Date()
        let signature = signatureStatus(verify: verify, bundleID: receipt.bundleID) {
            chains.checkSignature(of: receipt, at: validationTime)
        }
        return ReceiptAnalysis(
            format: .transactionReceipt, environmentName: receipt.environment, bundleID: receipt.bundleID,
            signature: signature, signedDate: receipt.purchaseDate, transactions: [receipt.transaction])
    }

    private func analyzeJWS(_ bytes: [UInt8], at time: Date?, nested: Bool, verify: Bool) -> ReceiptAnalysis {
        let jws: JWS
        do {
            jws = try JWS(text: bytes)
        } catch {
            return .unknown(error.reason)
        }
        let payload = jws.payload
        let format = jws.format
        let environmentText = payload.anyEnvironment
        let environment = environmentText.map { ReceiptEnvironmentName.normalized($0) }
        let signedDate = JWSPayload.date(payload.signedDate ?? payload.receiptCreationDate)
        let allowUnanchored = policy.allowXcode && environment == AppleEnvironment.xcode.rawValue
        var signature = signatureStatus(verify: verify, bundleID: payload.anyBundleID) {
            chains.checkSignature(of: jws, at: time ?? signedDate ?? Date(), allowUnanchored: allowUnanchored)
        }
        var analysis = ReceiptAnalysis(
            format: format, environmentName: environment, bundleID: payload.anyBundleID,
            signature: signature, signedDate: signedDate, appVersion: payload.applicationVersion,
            originalAppVersion: payload.originalApplicationVersion)
        switch format {
        case .signedTransaction:
            if let transaction = payload.transaction { analysis.transactions = [transaction] }
        case .signedRenewalInfo:
            analysis.renewalInfo = payload.renewalInfo
        case .notification:
            analysis.notification = NotificationInfo(
                notificationType: payload.notificationType ?? "", subtype: payload.subtype,
                notificationUUID: payload.notificationUUID, appAppleID: payload.appAppleID,
                summaryRequestID: payload.summary?.requestIdentifier)
            guard !nested else { return .unknown("a notification nested in a notification") }
            // Apple sends one of them: two would leave it ambiguous which app, environment and purchase it is about.
            guard payload.notificationBodyCount <= 1 else {
                return .unknown("a notification with more than one of data, summary, externalPurchaseToken, appData")
            }
            // The nested objects are JWS of their own; a notification is only as good as its worst part.
            let nestedTexts = [
                payload.data?.signedTransactionInfo, payload.data?.signedRenewalInfo,
                payload.appData?.signedAppTransactionInfo,
            ]
            for nestedText in nestedTexts {
                guard let nestedText else { continue }
                let inner = analyzeJWS(Array(nestedText.utf8), at: time, nested: true, verify: verify)
                if inner.format == .unknown {
                    signature = .invalid(reason: "nested JWS: \(inner.unknownReason ?? "malformed")")
                } else if signature == .valid, inner.signature != .valid {
                    signature = inner.signature
                }
                analysis.transactions += inner.transactions
                if let renewal = inner.renewalInfo { analysis.renewalInfo = renewal }
            }
            analysis.signature = signature
        default:
            break
        }
        return analysis
    }

    /// A short description of bytes that are no receipt, without echoing them whole.
    static func describeUnknown(_ bytes: [UInt8]) -> String {
        let printable = bytes.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || ReceiptInput.isWhitespace($0) }
        if printable {
            let preview = String(decoding: bytes.prefix(24), as: UTF8.self)
            return
                "not a receipt: \(bytes.count) bytes of text without receipt structure (\"\(preview)\(bytes.count > 24 ? "…" : "")\")"
        }
        return "not a receipt: \(bytes.count) bytes, neither PKCS#7, JWS nor a transaction receipt"
    }
}
