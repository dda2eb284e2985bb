/// The metric names of the worker, in one table so that dashboards, alerts and code agree. Exposed through
/// swift-metrics on `GET /metrics` in Prometheus text format. Labels carry codes only: outcome, reason, stage,
/// endpoint, status, partition; never an id, a receipt or a secret.
public enum MetricNames {
    /// Counter: jobs taken from Kafka.
    public static let jobsConsumed = "verify_jobs_consumed_total"
    /// Counter, labels `outcome`, `reason`, `decided_by`: verdicts published.
    public static let verdicts = "verify_verdicts_total"
    /// Counter, label `decided_by`: jobs decided without calling Apple.
    public static let appleCallsAvoided = "verify_apple_calls_avoided_total"
    /// Counter, label `via` (`worker`, `lease`): jobs that took another job's Apple answer for the same proof
    /// instead of calling (docs/RATE-LIMITING.md, "One Apple call per receipt").
    public static let appleCallsCoalesced = "verify_apple_calls_coalesced_total"
    /// Counter, labels `endpoint`, `status`: calls made to Apple.
    public static let appleCalls = "verify_apple_calls_total"
    /// Timer (histogram), label `endpoint`: latency of calls to Apple.
    public static let appleLatency = "verify_apple_call_duration_seconds"
    /// Gauge: jobs held by this worker (running or waiting for their account's earlier job).
    public static let inFlight = "verify_jobs_in_flight"
    /// Gauge, label `stage` (`ledger`, `apple`): jobs parked as data waiting for a runner of the worker's ledger or
    /// Apple stage (part of ``inFlight``; those waiting in the call gate are runners' jobs, not parked).
    public static let parkedJobs = "verify_jobs_parked"
    /// Gauge: partitions of the jobs topic assigned to this worker now.
    public static let assignedPartitions = "verify_assigned_partitions"
    /// Counter: times the consumer handed on an offset past one never handed on, and the partition was read
    /// again from the missing one (see docs/RELIABILITY.md).
    public static let offsetGaps = "verify_offset_gaps_total"
    /// Counter: times the consumer woke a fetcher that librdkafka 2.0.2 had left idle past its prefetch limit with
    /// messages waiting on the broker (see `FetchStallWakeUp` in the Kafka layer). Each cut a wait of up to a second.
    public static let fetchWakeUps = "verify_kafka_fetch_wakeups_total"
    /// Counter: acknowledgements without an offset that librdkafka 2.0.2 gave the worker's outputs (implicitly; such
    /// a message may be missing from the topic, see `KafkaProducer.sendConfirmed`); each is answered by sending the
    /// verdict or dead letter again, and each resend may store it twice; consumers de-duplicate by `verdict_id`.
    public static let produceResends = "verify_kafka_produce_resends_total"
    /// Gauge, label `partition`: offsets between the newest consumed and the committed position.
    public static let commitLag = "verify_commit_lag"
    /// Counter, label `reason`: messages sent to the dead-letter topic.
    public static let deadLetters = "verify_dead_letters_total"
    /// Counter, label `setting` (`shared_secret`, `server_api_key`): calls Apple refused because of this worker's own
    /// configuration (verifyReceipt 21004, Server API 401). Their jobs stay undecided; see `AppleConfigurationWatch`.
    public static let appleConfigurationFaults = "verify_apple_configuration_faults_total"
    /// Counter: dead letters sent with their value cut (`dlq.truncated`) because the whole did not fit in one record
    /// (`max_produce_bytes`, or a broker that refused it as too large); counted per form sent.
    public static let deadLettersTruncated = "verify_dead_letters_truncated_total"
    /// Timer (histogram): from a job's `submitted_at` (or consumption) to its verdict's delivery.
    public static let verdictLatency = "verify_job_duration_seconds"
}
