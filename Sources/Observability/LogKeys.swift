/// The metadata keys of every structured log line of every command and of the harness, in one place so that log
/// queries stay stable. One key per thing: an error is always `error`.
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
    /// An error's description or code (never holds secrets). The one spelling for every component.
    public static let error = "error"

    // MARK: Apple
    /// The app (bundle id) a part works for, when the catalog lists several.
    public static let appBundleID = "apple.bundle_id"
    /// The environment a request went to, the verifyReceipt status, the environment an answer is for.
    public static let appleEnvironment = "apple.environment"
    public static let appleReceiptEnvironment = "apple.receipt_environment"
    /// A Server API error code.
    public static let appleErrorCode = "apple.error_code"
    /// A follow-up call after a grant (`finish_transaction`, `consumption_information`) and the state it ended in.
    public static let followUpKind = "apple.call_kind"
    public static let followUpState = "apple.call_state"
    /// A Google Play purchase's app and product (its purchase token is never logged).
    public static let playPackageName = "play.package_name"
    public static let playProductID = "play.product_id"

    // MARK: Kafka
    /// A set of partitions (assigned, revoked, unknown).
    public static let partitions = "kafka.partitions"
    /// Attempts to send one record; librdkafka's error code, reason and log facility; a rewind; a deadline.
    public static let kafkaSends = "kafka.sends"
    public static let kafkaErrorCode = "kafka.error_code"
    public static let kafkaReason = "kafka.reason"
    public static let kafkaFacility = "kafka.facility"
    public static let kafkaRewind = "kafka.rewind"
    public static let kafkaDeadline = "kafka.deadline"

    // MARK: Processes and ports
    public static let drainTimeout = "worker.drain_timeout"
    public static let stopReason = "worker.stop_reason"
    public static let exitStatus = "worker.exit"
    /// The time a shutdown may take before the process is ended anyway.
    public static let shutdownLimit = "shutdown.limit"
    /// glibc's malloc arenas (`MALLOC_ARENA_MAX`).
    public static let mallocArenas = "malloc.arena_max"
    /// The port of an HTTP API, and the port of `/healthz`, `/readyz` and `/metrics`.
    public static let httpPort = "http.port"
    public static let metricsPort = "ops.port"
    /// The route of an HTTP request (`receipts`, `notifications`, an API route).
    public static let httpRoute = "http.route"

    // MARK: Stores (ledger and entitlement store)
    /// Migrations applied at start, and the store they were applied to (a path, or host and database; never a
    /// password).
    public static let migrations = "store.migrations"
    public static let store = "store.target"
    /// Consecutive failed attempts to reach the ledger.
    public static let failedAttempts = "ledger.failed_attempts"
    /// The account a transaction belongs to in the ledger.
    public static let owner = "ledger.owner"

    // MARK: The entitlement service
    public static let eventID = "entitlements.event_id"
    public static let webhookAttempts = "webhook.attempts"
    /// Why a verdicts-topic message could not be projected, and the id it is de-duplicated by.
    public static let problem = "entitlements.problem"
    public static let dedupeID = "entitlements.dedupe_id"
    /// Counts read from the configuration files (never their content).
    public static let tokenCount = "auth.tokens"
    /// The path of a configuration file a line is about (a tokens file in a deprecated format), never its content.
    public static let configurationFile = "config.file"
    public static let productCount = "catalog.products"

    // MARK: The harness (demo and chaos)
    public static let workerLog = "demo.worker_log"
    public static let chaosJobs = "chaos.jobs"
    public static let chaosMessages = "chaos.messages"
    public static let chaosPlannedMB = "chaos.planned_mb"
    public static let chaosPartitions = "chaos.partitions"
    public static let chaosWindowKB = "chaos.window_kb"
    public static let chaosSettled = "chaos.settled"
    public static let chaosExpected = "chaos.expected"
    public static let chaosFault = "chaos.fault"
    public static let chaosRecoverySeconds = "chaos.recovery_s"
    public static let chaosAccounts = "chaos.accounts"
    public static let chaosCommand = "chaos.command"
    public static let chaosInputs = "chaos.inputs"
    public static let chaosInputsPerSecond = "chaos.inputs_per_s"
    public static let reconcileWindowStart = "reconcile.window_start"
    public static let reconcileWindowEnd = "reconcile.window_end"
    public static let reconcileEnvironment = "reconcile.environment"
    public static let reconcilePages = "reconcile.pages"
    public static let reconcileRecovered = "reconcile.recovered"
    public static let reconcileHolder = "reconcile.holder"
    public static let reconcileSubscription = "reconcile.original_transaction_id"
    public static let reconcileCorrections = "reconcile.corrections"
}
