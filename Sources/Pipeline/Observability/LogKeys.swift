/// The metadata keys of every structured log line, in one place so that log queries stay stable.
/// Values are identifiers and codes only: never a receipt, a shared secret or key material.
public enum LogKeys {
    public static let jobID = "verify.job_id"
    public static let accountID = "verify.account_id"
    public static let outcome = "verify.outcome"
    public static let reason = "verify.reason"
    public static let decidedBy = "verify.decided_by"
    public static let format = "receipt.format"
    public static let transactionID = "receipt.transaction_id"
    public static let topic = "kafka.topic"
    public static let partition = "kafka.partition"
    public static let offset = "kafka.offset"
    public static let expectedOffset = "kafka.expected_offset"
    /// Outputs not proven delivered within the delivery timeout, and that timeout.
    public static let overdueOutputs = "kafka.overdue_outputs"
    public static let deliveryTimeout = "kafka.delivery_timeout"
    /// Attempts made so far (a lookup of committed offsets).
    public static let kafkaAttempts = "kafka.attempts"
    /// A cut dead letter: the whole value's size, and the bytes of it the dead letter keeps.
    public static let deadLetterOriginalBytes = "dlq.original_bytes"
    public static let deadLetterValueBytes = "dlq.value_bytes"
    public static let groupID = "kafka.group_id"
    public static let endpoint = "apple.endpoint"
    public static let appleStatus = "apple.status"
    public static let attempt = "apple.attempt"
    public static let workerID = "worker.id"
    /// The name of a configuration setting (never its value).
    public static let setting = "config.setting"
    public static let error = "error"
}
