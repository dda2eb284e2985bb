/// Every metric name of every command (worker, rate limiter, gateway, entitlement service), in one table so that
/// dashboards, alerts and code agree. Exposed through swift-metrics on `GET /metrics` in Prometheus text format.
/// Labels carry codes only: outcome, reason, stage, endpoint, status, partition, route; never an id, a receipt or a
/// secret. The names are part of the operator's contract (docs/OPERATIONS.md, docs/ENTITLEMENTS.md).
public enum MetricNames {
    // MARK: The worker (`verify-worker run`)

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
    /// Counter, label `code` (a ledger error code: `unavailable`, `timeout`, `busy`, `contention`, `database`): a
    /// job's ledger operation failed and is retried.
    public static let ledgerRetries = "verify_ledger_retries_total"
    /// Gauge: jobs retrying a failing ledger operation now.
    public static let ledgerRetryingJobs = "verify_ledger_retrying_jobs"
    /// Gauge: jobs retrying a failing ledger operation for longer than `ledger_retry_overdue_s` (`/readyz` says
    /// `ledger_retry_overdue` while there is one).
    public static let ledgerRetryOverdueJobs = "verify_ledger_retry_overdue_jobs"
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
    /// configuration (verifyReceipt 21004, Server API 401). Their jobs stay undecided; see `StoreConfigurationWatch`.
    public static let appleConfigurationFaults = "verify_apple_configuration_faults_total"
    /// Counter: dead letters sent with their value cut (`dlq.truncated`) because the whole did not fit in one record
    /// (`max_produce_bytes`, or a broker that refused it as too large); counted per form sent.
    public static let deadLettersTruncated = "verify_dead_letters_truncated_total"
    /// Timer (histogram): from a job's `submitted_at` (or consumption) to its verdict's delivery.
    public static let verdictLatency = "verify_job_duration_seconds"
    /// Counter, `result` (`sent`, `failed`, `retry_scheduled`, `already_recorded`, `ledger_error`, `dropped`):
    /// Finish Transaction calls after durable grants.
    public static let finishTransactions = "verify_finish_transactions_total"
    /// Counter, `result` (`sent`, `not_sent`, `failed`, `retry_scheduled`, `already_recorded`, `ledger_error`,
    /// `dropped`), `rule` (the refund policy's rule that made the answer; empty before one did): answers to
    /// CONSUMPTION_REQUEST notifications.
    public static let consumptionAnswers = "verify_consumption_answers_total"
    /// Counter, `result` (`found`, `unknown`, `invalid`, `failed`): the operator's consumption lookup, asked for the
    /// units of a one-time product consumed when a refund answer is built (`consumption_lookup_url`).
    public static let consumptionLookups = "verify_consumption_lookups_total"
    /// Gauge: follow-up calls (Finish Transaction, consumption answers) queued in this worker, not yet claimed.
    public static let followUpsQueued = "verify_finish_followups_queued"
    /// Counter, labels `call` (`acknowledge`, `consume`), `result` (`sent`, `failed`, `retry_scheduled`,
    /// `already_recorded`, `ledger_error`, `deferred`): Google Play acknowledges and consumes after grants.
    public static let googlePlayAcknowledgements = "verify_google_play_acknowledgements_total"
    /// Gauge: seconds since the oldest Google Play grant whose acknowledge (or consume) Google has not accepted yet
    /// was recorded, from the ledger (the whole cluster's); 0 when none. Google refunds after three days.
    public static let googlePlayOldestUnacknowledged = "verify_google_play_oldest_unacknowledged_seconds"
    /// Counter, `result` (as ``googlePlayAcknowledgements``, and `not_sent`), `rule` (the refund policy's rule that
    /// made the answer; empty before one did): answers to Google Play's pending refund reviews (`orders.reviewrefund`).
    public static let googlePlayRefundReviews = "verify_google_play_refund_reviews_total"
    /// Gauge: seconds since the oldest pending refund review Google has no answer to yet was recorded, from the
    /// ledger; 0 when none. Google waits 24 hours for an answer.
    public static let googlePlayOldestRefundReview = "verify_google_play_oldest_refund_review_seconds"

    // MARK: The Apple call gates (`RateLimiter`); each carries the label `gate`
    /// Gauge: the effective concurrency limit (local AIMD limit, lowered by remote signals).
    public static let rateLimiterConcurrencyLimit = "verify_ratelimiter_concurrency_limit"
    /// Gauge: Apple calls in flight through the gate.
    public static let rateLimiterInFlight = "verify_ratelimiter_in_flight"
    /// Gauge: callers waiting in the gate.
    public static let rateLimiterQueuedWaiters = "verify_ratelimiter_queued_waiters"
    /// Counter: acquisitions that failed; dimension `reason` (deadline_exceeded, circuit_open, queue_full).
    public static let rateLimiterRejections = "verify_ratelimiter_rejections_total"
    /// Gauge: the local breaker state, 0 closed, 1 half-open, 2 open.
    public static let rateLimiterBreakerState = "verify_ratelimiter_breaker_state"
    /// Counter: retries admitted.
    public static let rateLimiterRetries = "verify_ratelimiter_retries_total"
    /// Counter: retries that had to wait because the retry budget was spent.
    public static let rateLimiterRetryBudgetExhausted = "verify_ratelimiter_retry_budget_exhausted_total"
    /// Counter: call outcomes reported; dimension `outcome` (success, throttled, timeout, failure, not_sent).
    public static let rateLimiterOutcomes = "verify_ratelimiter_outcomes_total"
    /// The dimension naming the gate.
    public static let gateLabel = "gate"
    /// The dimension giving a rejection's reason.
    public static let reasonLabel = "reason"
    /// The dimension giving a call's outcome.
    public static let outcomeLabel = "outcome"

    // MARK: The gateway (`verify-worker gateway`)
    /// Counter `{route, status}`: requests answered, by route (`receipts`, `notifications`) and HTTP status.
    public static let gatewayRequests = "verify_gateway_requests_total"
    /// Histogram `{route}`: time from the request's arrival to its answer, publish included.
    public static let gatewayRequestDuration = "verify_gateway_request_duration_seconds"
    /// Counter `{route}`: jobs Kafka acknowledged.
    public static let gatewayPublished = "verify_gateway_jobs_published_total"
    /// Counter `{route, error}`: requests refused or failed, by error code (`missing_field`, `kafka_unavailable`…).
    public static let gatewayErrors = "verify_gateway_errors_total"
    /// Counter `{outcome}`: Google Play Pub/Sub pushes answered, by outcome (`accepted`: published; `discarded`:
    /// acknowledged with nothing published; `refused`: not authenticated; `failed`: not published, Pub/Sub retries).
    public static let gatewayPushes = "verify_gateway_pubsub_pushes_total"
    /// Counter `{reason}`: Google Play pushes acknowledged but never published, permanently bad (`data_not_base64`…).
    public static let gatewayNotificationsDiscarded = "verify_gateway_notifications_discarded_total"

    // MARK: The entitlement service (`verify-worker entitlements`)
    /// Counter, `result` = applied, no_change, stale, duplicate, ignored: messages of the verdicts topic projected.
    public static let entitlementsVerdicts = "verify_entitlements_verdicts_total"
    /// Counter, `code`: messages ignored because they could not be understood (unknown schema, outcome, …).
    public static let entitlementsIgnored = "verify_entitlements_ignored_total"
    /// Timer: one batch, from the store's load to its commit.
    public static let entitlementsBatchDuration = "verify_entitlements_batch_duration_seconds"
    /// Counter, `error`: batches that failed and were retried (the store was down or busy).
    public static let entitlementsStoreErrors = "verify_entitlements_store_errors_total"
    /// Gauge: seconds between now and the Kafka timestamp of the newest verdict applied (visibility delay).
    public static let entitlementsLag = "verify_entitlements_lag_seconds"
    /// Counter, `type`: lifecycle events created.
    public static let entitlementsEvents = "verify_entitlements_events_total"
    /// Counter, `result` = published, failed: lifecycle events sent to the events topic.
    public static let entitlementsEventsPublished = "verify_entitlements_events_published_total"
    /// Counter, `result` = delivered, failed, given_up: webhook attempts.
    public static let entitlementsWebhookAttempts = "verify_entitlements_webhook_attempts_total"
    /// Counter, `route`, `status`: API and console requests.
    public static let entitlementsRequests = "verify_entitlements_requests_total"
    /// Timer, `route`: API request duration.
    public static let entitlementsRequestDuration = "verify_entitlements_request_duration_seconds"
    /// Counter: requests refused for a missing or wrong token.
    public static let entitlementsAuthenticationFailures = "verify_entitlements_authentication_failures_total"

    // MARK: The reconciler (`verify-worker reconcile`)
    /// Gauge: the checkpoint, seconds since 1970: Apple's notification history before it has been swept.
    public static let reconcileCheckpoint = "verify_reconcile_checkpoint_timestamp_seconds"
    /// Gauge: 1 while this replica holds the reconciler's lease, else 0.
    public static let reconcileLeaseHeld = "verify_reconcile_lease_held"
    /// Counter: notifications found in Apple's history of failed deliveries and published as jobs, each counted
    /// once (a later sweep that finds and publishes it again does not count it again).
    public static let reconcileNotificationsRecovered = "verify_reconcile_notifications_recovered_total"
    /// Counter: notifications in the history that make no job (no readable `notificationUUID`); skipped.
    public static let reconcileNotificationsUnreadable = "verify_reconcile_notifications_unreadable_total"
    /// Counter, `result` = completed, failed, lease_lost: sweeps.
    public static let reconcileSweeps = "verify_reconcile_sweeps_total"
    /// Counter, `result` = answered, retryable, failed: Get Notification History requests.
    public static let reconcileRequests = "verify_reconcile_requests_total"
    /// Counter, `result` = read, rejected, failed: subscriptions whose transaction history was re-read (unsure state).
    public static let reconcileRereads = "verify_reconcile_rereads_total"
    /// Counter: corrections published as jobs after a re-read (a renewal, refund or later expiry the ledger lacked).
    public static let reconcileCorrections = "verify_reconcile_corrections_total"
    /// Counter, `store`, `app`, `result` = completed, failed, lease_lost: sweeps of Google Play's Voided Purchases API.
    public static let reconcileVoidedSweeps = "verify_reconcile_voided_sweeps_total"
    /// Counter, `store`, `app`: pages of `purchases.voidedpurchases.list` read (one call each).
    public static let reconcileVoidedPages = "verify_reconcile_voided_pages_total"
    /// Counter, `store`, `app`: voided purchases found in the pages (each page's records; overlapping windows count a
    /// purchase again).
    public static let reconcileVoidedFound = "verify_reconcile_voided_found_total"
    /// Counter, `store`, `app`, `result` = published, unusable: voided purchases published as jobs, or making none.
    public static let reconcileVoidedJobs = "verify_reconcile_voided_jobs_total"
    /// Counter, `store`, `app`: re-read jobs published for Play subscriptions the ledger is unsure of.
    public static let reconcilePlayRereads = "verify_reconcile_play_rereads_published_total"
    /// Counter, `store`, `app`, `call` = voided_list, reread: calls of the reconciler's share of Google's quota.
    public static let reconcileQuotaSpent = "verify_reconcile_quota_spent_total"
    /// Gauge, `store`, `app`: seconds between now and the voided-purchases checkpoint, after each sweep.
    public static let reconcileVoidedCheckpointAge = "verify_reconcile_voided_checkpoint_age_seconds"

    // MARK: What `/metrics` says of each name

    /// The part of the system a metric belongs to; each command exposes the metrics of its parts.
    public enum Part: Sendable, Hashable {
        /// `verify-worker run`: the pipeline.
        case worker
        /// `verify-worker run`: its Apple call gates (`RateLimiter`).
        case appleCallGate
        case gateway
        case entitlements
        case reconciler
    }

    /// One metric family: its name, Prometheus type, labels (none: one series), the `# HELP` text of `/metrics`,
    /// and the part that records it.
    public struct Description: Sendable {
        public enum Kind: String, Sendable {
            case counter, gauge, histogram
        }

        public let name: String
        public let kind: Kind
        public let labels: [String]
        public let help: String
        public let part: Part

        init(_ name: String, _ kind: Kind, _ labels: [String], _ part: Part, _ help: String) {
            self.name = name
            self.kind = kind
            self.labels = labels
            self.part = part
            self.help = help
        }
    }

    /// Every metric with its `# HELP` text. A new metric gets its constant above and its line here; `/metrics`
    /// declares the names of its command's parts from the start (see `MetricsExposition` in Operations).
    public static let descriptions: [Description] = [
        // The worker (`verify-worker run`).
        .init(jobsConsumed, .counter, [], .worker, "Jobs taken from the jobs topic."),
        .init(verdicts, .counter, ["outcome", "reason", "decided_by"], .worker, "Verdicts published."),
        .init(appleCallsAvoided, .counter, ["decided_by"], .worker, "Jobs decided without calling Apple."),
        .init(
            appleCallsCoalesced, .counter, ["via"], .worker,
            "Jobs that took another job's Apple answer for the same proof instead of calling."),
        .init(
            appleCalls, .counter, ["endpoint", "status"], .worker,
            "Calls made to Apple, by endpoint and answer: ok, Apple's refusal (the verifyReceipt status, http_401), "
                + "or the retryable or failed outcome."),
        .init(appleLatency, .histogram, ["endpoint"], .worker, "Latency of calls to Apple, in seconds."),
        .init(inFlight, .gauge, [], .worker, "Jobs held by this worker (running or waiting for their account)."),
        .init(
            parkedJobs, .gauge, ["stage"], .worker,
            "Jobs parked as data waiting for a runner of the ledger or Apple stage."),
        .init(assignedPartitions, .gauge, [], .worker, "Partitions of the jobs topic assigned to this worker."),
        .init(ledgerRetries, .counter, ["code"], .worker, "Failed ledger operations of jobs, retried, by error code."),
        .init(ledgerRetryingJobs, .gauge, [], .worker, "Jobs retrying a failing ledger operation now."),
        .init(
            ledgerRetryOverdueJobs, .gauge, [], .worker,
            "Jobs retrying a failing ledger operation for longer than ledger_retry_overdue_s."),
        .init(
            offsetGaps, .counter, [], .worker,
            "Times a partition was read again from an offset the consumer skipped."),
        .init(
            fetchWakeUps, .counter, [], .worker,
            "Times the consumer woke a fetcher librdkafka had left idle with messages waiting."),
        .init(
            produceResends, .counter, [], .worker,
            "Verdicts or dead letters sent again after an acknowledgement without an offset."),
        .init(commitLag, .gauge, ["partition"], .worker, "Offsets between the newest consumed and the committed one."),
        .init(deadLetters, .counter, ["reason"], .worker, "Messages sent to the dead-letter topic."),
        .init(
            appleConfigurationFaults, .counter, ["setting"], .worker,
            "Apple calls refused because of this worker's configuration (verifyReceipt 21004, Server API 401)."),
        .init(
            deadLettersTruncated, .counter, [], .worker,
            "Dead letters sent with their value cut to fit one record."),
        .init(
            verdictLatency, .histogram, [], .worker,
            "Seconds from a job's submission (or consumption) to its verdict's delivery."),
        .init(
            finishTransactions, .counter, ["result"], .worker,
            "Finish Transaction calls after durable grants, by result."),
        .init(
            consumptionAnswers, .counter, ["result", "rule"], .worker,
            "Answers to CONSUMPTION_REQUEST notifications, by result and the refund policy's rule."),
        .init(
            consumptionLookups, .counter, ["result"], .worker,
            "Consumption lookups (units of a one-time product consumed) asked for refund answers, by result."),
        .init(
            followUpsQueued, .gauge, [], .worker,
            "Follow-up calls (Finish Transaction, consumption answers) queued in this worker, not yet claimed."),
        .init(
            googlePlayAcknowledgements, .counter, ["call", "result"], .worker,
            "Google Play acknowledges and consumes after grants, by call and result."),
        .init(
            googlePlayOldestUnacknowledged, .gauge, [], .worker,
            "Seconds since the oldest Google Play grant not yet acknowledged by Google was recorded (0 when none)."),
        .init(
            googlePlayRefundReviews, .counter, ["result", "rule"], .worker,
            "Answers to Google Play's pending refund reviews (orders.reviewrefund), by result and the refund policy's "
                + "rule."),
        .init(
            googlePlayOldestRefundReview, .gauge, [], .worker,
            "Seconds since the oldest Google Play refund review not yet answered was recorded (0 when none)."),

        // The Apple call gates of the worker.
        .init(
            rateLimiterConcurrencyLimit, .gauge, [gateLabel], .appleCallGate,
            "The gate's effective concurrency limit (AIMD, lowered by other workers' signals)."),
        .init(rateLimiterInFlight, .gauge, [gateLabel], .appleCallGate, "Apple calls in flight through the gate."),
        .init(rateLimiterQueuedWaiters, .gauge, [gateLabel], .appleCallGate, "Callers waiting in the gate."),
        .init(
            rateLimiterRejections, .counter, [gateLabel, reasonLabel], .appleCallGate,
            "Acquisitions that failed (deadline_exceeded, circuit_open, queue_full)."),
        .init(
            rateLimiterBreakerState, .gauge, [gateLabel], .appleCallGate,
            "The gate's breaker: 0 closed, 1 half-open, 2 open."),
        .init(rateLimiterRetries, .counter, [gateLabel], .appleCallGate, "Retries admitted by the gate."),
        .init(
            rateLimiterRetryBudgetExhausted, .counter, [gateLabel], .appleCallGate,
            "Retries that waited because the retry budget was spent."),
        .init(
            rateLimiterOutcomes, .counter, [gateLabel, outcomeLabel], .appleCallGate,
            "Call outcomes reported to the gate (success, throttled, timeout, failure, not_sent)."),

        // The gateway.
        .init(
            gatewayRequests, .counter, ["route", "status"], .gateway, "Requests answered, by route and HTTP status."),
        .init(
            gatewayRequestDuration, .histogram, ["route"], .gateway,
            "Seconds from a request's arrival to its answer, publish included."),
        .init(gatewayPublished, .counter, ["route"], .gateway, "Jobs Kafka acknowledged."),
        .init(gatewayErrors, .counter, ["route", "error"], .gateway, "Requests refused or failed, by error code."),
        .init(
            gatewayPushes, .counter, ["outcome"], .gateway,
            "Google Play Pub/Sub pushes answered: accepted, discarded, refused (401) or failed (5xx)."),
        .init(
            gatewayNotificationsDiscarded, .counter, ["reason"], .gateway,
            "Google Play pushes acknowledged without a job (permanently bad), by reason."),

        // The entitlement service.
        .init(
            entitlementsVerdicts, .counter, ["result"], .entitlements,
            "Messages of the verdicts topic projected (applied, no_change, stale, duplicate, ignored)."),
        .init(
            entitlementsIgnored, .counter, ["code"], .entitlements,
            "Messages ignored because they could not be understood."),
        .init(
            entitlementsBatchDuration, .histogram, [], .entitlements,
            "Seconds one batch takes, from the store's load to its commit."),
        .init(
            entitlementsStoreErrors, .counter, ["error"], .entitlements,
            "Batches that failed and were retried (the store was down or busy)."),
        .init(
            entitlementsLag, .gauge, [], .entitlements,
            "Seconds between now and the Kafka timestamp of the newest verdict applied."),
        .init(entitlementsEvents, .counter, ["type"], .entitlements, "Lifecycle events created."),
        .init(
            entitlementsEventsPublished, .counter, ["result"], .entitlements,
            "Lifecycle events sent to the events topic (published, failed)."),
        .init(
            entitlementsWebhookAttempts, .counter, ["result"], .entitlements,
            "Webhook attempts (delivered, failed, given_up)."),
        .init(
            entitlementsRequests, .counter, ["route", "status"], .entitlements,
            "API and console requests, by route and HTTP status."),
        .init(entitlementsRequestDuration, .histogram, ["route"], .entitlements, "API request duration, in seconds."),
        .init(
            entitlementsAuthenticationFailures, .counter, [], .entitlements,
            "Requests refused for a missing or wrong token."),

        // The reconciler (`app` only when the catalog lists several apps).
        .init(
            reconcileCheckpoint, .gauge, [], .reconciler,
            "Seconds since 1970 of the checkpoint: Apple's notification history before it has been swept."),
        .init(reconcileLeaseHeld, .gauge, [], .reconciler, "1 while this replica holds the reconciler's lease."),
        .init(
            reconcileNotificationsRecovered, .counter, [], .reconciler,
            "Notifications found in Apple's history of failed deliveries and published as jobs, each counted once."),
        .init(
            reconcileNotificationsUnreadable, .counter, [], .reconciler,
            "Notifications in the history that make no job (no readable notificationUUID)."),
        .init(reconcileSweeps, .counter, ["result"], .reconciler, "Sweeps (completed, failed, lease_lost)."),
        .init(
            reconcileRequests, .counter, ["result"], .reconciler,
            "Get Notification History requests (answered, retryable, failed)."),
        .init(
            reconcileRereads, .counter, ["result"], .reconciler,
            "Subscriptions whose transaction history was re-read (read, rejected, failed)."),
        .init(
            reconcileCorrections, .counter, [], .reconciler,
            "Corrections published as jobs after a re-read (a renewal, refund or expiry the ledger lacked)."),
        .init(
            reconcileVoidedSweeps, .counter, ["store", "app", "result"], .reconciler,
            "Sweeps of Google Play's Voided Purchases API (completed, failed, lease_lost)."),
        .init(
            reconcileVoidedPages, .counter, ["store", "app"], .reconciler,
            "Pages of purchases.voidedpurchases.list read, one call each."),
        .init(
            reconcileVoidedFound, .counter, ["store", "app"], .reconciler,
            "Voided purchases found in the pages read (overlapping windows count one again)."),
        .init(
            reconcileVoidedJobs, .counter, ["store", "app", "result"], .reconciler,
            "Voided purchases published as jobs (published) or making none (unusable)."),
        .init(
            reconcilePlayRereads, .counter, ["store", "app"], .reconciler,
            "Re-read jobs published for Play subscriptions the ledger is unsure of."),
        .init(
            reconcileQuotaSpent, .counter, ["store", "app", "call"], .reconciler,
            "Calls of the reconciler's share of Google's per-minute quota (voided_list, reread)."),
        .init(
            reconcileVoidedCheckpointAge, .gauge, ["store", "app"], .reconciler,
            "Seconds between now and the voided-purchases checkpoint, after each sweep."),
    ]

    /// The description of `name`, if it is one of the table's.
    public static func description(of name: String) -> Description? { byName[name] }

    private static let byName: [String: Description] = Dictionary(
        descriptions.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

    /// The metrics of `parts`, in the table's order.
    public static func names(of parts: Set<Part>) -> [String] {
        descriptions.filter { parts.contains($0.part) }.map(\.name)
    }
}
