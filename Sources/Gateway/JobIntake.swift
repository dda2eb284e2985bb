import Foundation
import Messages

/// Turns request bodies into jobs with the message contract's rules (``MessageCodec``: size limit, strict
/// fields, one proof), so that what the gateway publishes is never dead-lettered by a worker.
public struct JobIntake: Sendable {
    public var codec: MessageCodec
    /// The `account_id` of jobs made from App Store Server Notifications (they name no account; the worker finds
    /// the owner of the subscription in its ledger).
    public var notificationAccountID: String
    /// Makes a `job_id` for a frontend's job that has none. Default: a random UUID.
    public var makeJobID: @Sendable () -> String
    /// Now, for the `submitted_at` of notification jobs and of frontends' jobs that carry none.
    public var now: @Sendable () -> Date

    /// Prefix of the `job_id` of a notification job, followed by the notification's `notificationUUID`.
    public static let notificationJobIDPrefix = NotificationJob.jobIDPrefix
    /// Prefixes of the `job_id`s of Google Play notification jobs (a Pub/Sub message, a voided order, a re-read): a
    /// frontend's job squatting one would hand that notification its recorded verdict.
    public static let googlePlayJobIDPrefixes = [
        GooglePlayNotificationJob.jobIDPrefix, GooglePlayNotificationJob.voidedJobIDPrefix,
        GooglePlayNotificationJob.rereadJobIDPrefix,
    ]
    /// The `job_id` prefixes a frontend may not use, and whose they are. A job id squatted before the store's
    /// notification arrives would hand that notification the squatter's recorded verdict; a correction's id is also
    /// what lets the reconciler's reversal correction reinstate a claim.
    static let reservedJobIDPrefixes: [(prefix: String, owner: String)] =
        [
            (notificationJobIDPrefix, "App Store Server Notifications"),
            (CorrectionJob.jobIDPrefix, "the reconciler's corrections"),
        ]
        + googlePlayJobIDPrefixes.map { ($0, "Google Play notification jobs") }

    public init(
        codec: MessageCodec = MessageCodec(), notificationAccountID: String = NotificationJob.defaultAccountID,
        makeJobID: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() },
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.codec = codec
        self.notificationAccountID = notificationAccountID
        self.makeJobID = makeJobID
        self.now = now
    }

    /// A job in the `receipt-job/v1` wire shape (docs/messages.md). Three fields may be left out: `schema` (taken
    /// as `receipt-job/v1`), `job_id` (a new UUID; a frontend that retries should send its own, so that the
    /// retry is the same job downstream) and `submitted_at` (now).
    public func job(fromFrontendJSON body: [UInt8]) throws(GatewayError) -> ReceiptJob {
        let object = try jsonObject(body)
        var additions: [String: String] = [:]
        if object["schema"] == nil || object["schema"] is NSNull { additions["schema"] = ReceiptJob.schema }
        if object["job_id"] == nil || object["job_id"] is NSNull { additions["job_id"] = makeJobID() }
        let completed = additions.isEmpty ? body : Self.inserting(additions, into: body)
        var job: ReceiptJob
        do {
            job = try codec.decodeJob(completed)
        } catch {
            throw GatewayError(error)
        }
        try refuseNotificationNamespace(job)
        // Stamped here when the frontend did not: the worker's verify_job_duration_seconds starts from it, and a job
        // read again after a rebalance is decided at the same time as the first time.
        if job.submittedAt == nil { job.submittedAt = now() }
        return job
    }

    /// A request body as a JSON object: refused `tooLarge` past the worker's message limit (before any parsing), and
    /// `notJSON` when it is not an object in UTF-8.
    private func jsonObject(_ body: [UInt8]) throws(GatewayError) -> [String: Any] {
        guard body.count <= codec.maximumMessageBytes else {
            throw GatewayError(.tooLarge, "\(body.count) bytes, limit \(codec.maximumMessageBytes)")
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw GatewayError(.notJSON, "the body must be a JSON object in UTF-8")
        }
        return object
    }

    /// A frontend may not use the identifiers of notification jobs and of the reconciler's corrections
    /// (``reservedJobIDPrefixes``), and the notifications' account would own what a frontend claims for it. The
    /// account's lanes (`<account>/<originalTransactionId>`, the Kafka keys of notification jobs) are refused with it:
    /// a frontend's job keyed so would queue in a subscription's lane. Compared without case, so no near-copy of a
    /// notification id passes.
    func refuseNotificationNamespace(_ job: ReceiptJob) throws(GatewayError) {
        let jobID = job.jobID.lowercased()
        for (prefix, owner) in Self.reservedJobIDPrefixes where jobID.hasPrefix(prefix) {
            throw GatewayError(.reservedID, field: "job_id", "job_id: the prefix \(prefix) is reserved for \(owner)")
        }
        if ReceiptJob.isLane(job.accountID.lowercased(), of: GooglePlayNotificationJob.defaultAccountID) {
            throw GatewayError(
                .invalidValue, field: "account_id",
                "account_id: \(GooglePlayNotificationJob.defaultAccountID) and its lanes are reserved for Google Play "
                    + "notification jobs")
        }
        if ReceiptJob.isLane(job.accountID.lowercased(), of: notificationAccountID.lowercased()) {
            throw GatewayError(
                .invalidValue, field: "account_id",
                "account_id: the notification account and its lanes (\(notificationAccountID)/…) are reserved for App "
                    + "Store Server Notifications")
        }
    }

    /// An App Store Server Notifications V2 request, `{"signedPayload": "<JWS>"}`, as a job whose proof is the
    /// signed payload. The payload is read without verifying its signature (the worker verifies it) and only for
    /// its `notificationUUID`: the `job_id` is derived from it, so Apple's retries of one notification are one job.
    public func job(fromNotificationJSON body: [UInt8]) throws(GatewayError) -> ReceiptJob {
        let object = try jsonObject(body)
        guard let raw = object["signedPayload"], !(raw is NSNull) else {
            throw GatewayError(.missingField, field: "signedPayload", "signedPayload: required")
        }
        guard let signedPayload = raw as? String else {
            throw GatewayError(.wrongType, field: "signedPayload", "signedPayload: expected string")
        }
        let job: ReceiptJob
        do {
            job = try NotificationJob.job(
                signedPayload: signedPayload, accountID: notificationAccountID, submittedAt: now())
        } catch {
            let field =
                error == .notCompactJWS || error == .payloadNotJSON
                ? "signedPayload" : "signedPayload.notificationUUID"
            throw GatewayError(.invalidValue, field: field, "signedPayload: \(error)")
        }
        do {
            try job.validate()
        } catch let error as MessageError {
            throw GatewayError(error)
        } catch {
            throw GatewayError(.invalidValue, "the notification does not make a valid job")
        }
        return job
    }

    /// `body` (a JSON object) with string members added right after its opening brace. The original bytes are
    /// kept as sent, so the codec reads exactly what the frontend wrote plus the additions.
    static func inserting(_ members: [String: String], into body: [UInt8]) -> [UInt8] {
        guard let brace = body.firstIndex(of: UInt8(ascii: "{")) else { return body }
        var inserted: [UInt8] = []
        for (name, value) in members.sorted(by: { $0.key < $1.key }) {
            inserted += GatewayJSON.encode(name) + [UInt8(ascii: ":")] + GatewayJSON.encode(value)
            inserted.append(UInt8(ascii: ","))
        }
        // An empty object `{}` must not get a trailing comma.
        let rest = body[(brace + 1)...]
        if rest.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "}") {
            inserted.removeLast()
        }
        return Array(body[...brace]) + inserted + Array(rest)
    }
}
