import Foundation
import Messages

/// Everything `verify-worker run` is configured with. Each property's key, default and meaning are in
/// ``keys``, the one table that `--help`, `docs/CONFIGURATION.md` and the deployment checks are generated from.
/// Here, beside the table type, because `verify-worker reconcile` reads the same keys (one ConfigMap serves both)
/// without depending on the worker.
public struct WorkerConfiguration: Sendable, TableConfiguration {
    // MARK: Kafka
    public var brokers: String
    public var groupID: String
    public var jobsTopic: String
    public var verdictsTopic: String
    public var deadLetterTopic: String
    public var controlTopic: String
    /// librdkafka properties passed through as they are, after the safe defaults.
    public var kafkaProperties: [String: String]
    /// librdkafka's `queued.max.messages.kbytes` for the worker's consumers.
    public var kafkaPrefetchKilobytes: Int
    public var workerID: String

    // MARK: Decisions
    public var ledgerURL: String
    public var catalogFile: String
    public var trustAnchorFiles: [String]
    public var allowSandbox: Bool
    public var allowXcode: Bool
    /// The app's Apple id; when set, a production notification naming another app is `rejected` / `wrong_app`.
    public var appleAppAppleID: Int64?
    public var maximumMessageBytes: Int
    public var maximumReceiptBytes: Int
    /// The largest record the worker produces, framing included; librdkafka's `message.max.bytes` for its producer.
    public var maximumProduceBytes: Int

    // MARK: Apple
    public var verifyReceiptProductionURL: String
    public var verifyReceiptSandboxURL: String
    public var serverAPIProductionURL: String
    public var serverAPISandboxURL: String
    /// Accept `http://` Apple URLs to hosts other than loopback (development only).
    public var allowHTTPAppleURLs: Bool
    public var caBundle: String?
    public var sharedSecret: Secret?
    public var serverAPIKey: Secret?
    public var serverAPIKeyID: String?
    public var serverAPIIssuerID: String?
    public var appleConnectTimeout: Duration
    public var appleRequestTimeout: Duration

    // MARK: Limits
    public var maximumInFlight: Int
    public var jobDeadline: Duration
    /// How long a job may retry a failing ledger operation before `/readyz` and a metric report it (it goes on).
    public var ledgerRetryOverdue: Duration
    public var appleMaximumConcurrency: Int
    public var appleMinimumConcurrency: Int
    // MARK: Follow-ups
    /// Call Finish Transaction once a grant is durable (``AppleFollowUps``).
    public var finishTransactions: Bool
    /// Answer each CONSUMPTION_REQUEST with Send Consumption Information (``AppleFollowUps``).
    public var consumptionAnswers: Bool
    /// The operator's policy on the customer's consent to share consumption data: without it no answer is sent.
    public var consumptionCustomerConsented: Bool
    /// The refund policy file whose rules answer consumption requests and refund reviews (`refund_policy_file`,
    /// docs/REFUNDS.md); nil: the catalog's `refund_preference` shorthand, then data only.
    public var refundPolicyFile: String?
    /// The operator's consumption lookup, asked for the units of a one-time product consumed when a refund answer is
    /// built (`consumption_lookup_url`, docs/REFUNDS.md); nil: no lookup, the units stay unknown.
    public var consumptionLookupURL: String?
    /// The bearer token sent to the consumption lookup, read at start from `consumption_lookup_token_file`.
    public var consumptionLookupToken: Secret?
    /// How long one consumption lookup may take (`consumption_lookup_timeout_ms`).
    public var consumptionLookupTimeout: Duration = .milliseconds(2000)
    /// How long a claim on a follow-up call holds (``AppleFollowUpsConfiguration/claimLease``, Google Play's too).
    public var followUpClaimLease: Duration = .seconds(300)
    /// How often the ledger is swept for due follow-up calls (``AppleFollowUpsConfiguration/sweepInterval``, Google
    /// Play's too).
    public var followUpSweepInterval: Duration = .seconds(30)
    /// Set App Account Token on new grants made without a token (`set_app_account_tokens`).
    public var setAppAccountTokens: Bool

    public var verifyReceiptRatePerSecond: Double
    public var serverAPIRatePerSecond: Double
    /// The Google Play Developer API's base URL (`google_play_api_url`).
    public var googlePlayAPIURL: String
    /// Google's OAuth 2.0 token URL (`google_play_token_url`).
    public var googlePlayTokenURL: String
    /// Google Play Developer API calls per Pacific day this worker may make (`google_play_daily_quota`).
    public var googlePlayDailyQuota: Int
    /// Developer API calls per minute per quota bucket this worker may make (`google_play_minute_quota`).
    public var googlePlayMinuteQuota: Int
    /// Answer each Google Play pending refund review (`google_play_refund_review_answers`).
    public var googlePlayRefundReviewAnswers: Bool
    public var retryBudgetRatio: Double
    /// Jobs with the same proof at once share one Apple answer (``AppleCoalescingConfiguration``).
    public var coalesceAppleCalls: Bool
    /// The verification lease's length; zero shares answers within the worker only.
    public var verificationLease: Duration
    public var drainTimeout: Duration
    /// How long a verdict or dead letter may go without proof of delivery before the worker reports itself unready.
    public var deliveryTimeout: Duration

    // MARK: Operations
    public var metricsPort: Int
    public var metricsHost: String
    public var logLevel: String
    public var logFormat: String

    /// Every key, with its default and meaning. Order is the order `--help` shows them in.
    public static let keys: [ConfigurationKey] = [
        .brokers,
        .init("group_id", default: "verify-workers", "Consumer group of the workers; one group per deployment."),
        .init("jobs_topic", default: "receipt-jobs", "Topic the jobs are consumed from."),
        .init("verdicts_topic", default: "receipt-verdicts", "Topic verdicts are published to."),
        .init("dead_letter_topic", default: "receipt-jobs-dlq", "Topic for messages that are not valid jobs."),
        .init("control_topic", default: "receipt-control", "Compacted topic for throttle signals between workers."),
        .kafkaProperties,
        .init(
            "kafka_prefetch_kbytes", default: "8192",
            "Most KiB of messages the consumer prefetches ahead of the worker (librdkafka queued.max.messages.kbytes, "
                + "whose 65536 default only costs memory: max_in_flight already holds the work)."),
        .init("worker_id", default: "the host name", "This worker's id in throttle signals and logs."),
        .init(
            "ledger_url", default: "sqlite:verify-ledger.sqlite",
            "Ledger of granted transactions: postgres://user@host:port/db (?sslmode=verify-full&sslrootcert=CA.pem to "
                + "check the server's certificate; docs/LEDGER.md) or sqlite:PATH."),
        .init(
            "catalog_file", required: true,
            "JSON catalog of allowed bundle ids and products with their types (see docs/CONFIGURATION.md)."),
        .init(
            "trust_anchors", default: "the Apple roots",
            "Extra trust anchor certificates (DER or PEM files), comma-separated; the Apple roots are always in."),
        .init("allow_sandbox", default: "false", "Accept sandbox purchases (App Review buys in sandbox)."),
        .init("allow_xcode", default: "false", "Accept Xcode StoreKit-testing receipts (development only)."),
        .init(
            "apple_app_apple_id",
            "The app's Apple id, appAppleId, a number (default: none, not checked). When set, a production App Store "
                + "notification naming another app, or none, is rejected with reason wrong_app."),
        .init("max_message_bytes", default: "1048576", "Largest job message accepted; larger ones are dead-lettered."),
        .init("max_receipt_bytes", default: "1048576", "Largest decoded receipt accepted."),
        .init(
            "max_produce_bytes", default: "1000000",
            "Largest record the worker produces, key, headers and framing included (its producer's librdkafka "
                + "message.max.bytes); keep it at most the brokers' max.message.bytes (Kafka's default 1048588). A dead "
                + "letter that would be larger is sent with its value cut (dlq.truncated, dlq.original_bytes, "
                + "dlq.original_sha256)."),
        .init(
            "verify_receipt_production_url", default: "https://buy.itunes.apple.com/verifyReceipt",
            "verifyReceipt production endpoint."),
        .init(
            "verify_receipt_sandbox_url", default: "https://sandbox.itunes.apple.com/verifyReceipt",
            "verifyReceipt sandbox endpoint."),
        .init(
            "server_api_production_url", default: "https://api.storekit.apple.com",
            "App Store Server API production base URL (Apple's recommended domain since 2026-05-05; the former "
                + "https://api.storekit.itunes.apple.com can still be set)."),
        .init(
            "server_api_sandbox_url", default: "https://api.storekit-sandbox.apple.com",
            "App Store Server API sandbox base URL (the former https://api.storekit-sandbox.itunes.apple.com can "
                + "still be set)."),
        .init(
            "allow_http_apple_urls", default: "false",
            "Accept http:// Apple URLs to hosts other than loopback (a simulator in a compose network; never in "
                + "production: the shared secret and Server API tokens would travel in clear)."),
        .init("ca_bundle", "CA certificates file for TLS to Apple (default: the system's). Verification is always on."),
        .init(
            "shared_secret", secret: true,
            "App-specific shared secret for verifyReceipt (VERIFY_SHARED_SECRET or VERIFY_SHARED_SECRET_FILE)."),
        .init(
            "server_api_key", secret: true,
            "App Store Server API private key, .p8 PEM (VERIFY_SERVER_API_KEY or VERIFY_SERVER_API_KEY_FILE)."),
        .init("server_api_key_id", "Key id of the Server API key (default: none; required with server_api_key)."),
        .init("server_api_issuer_id", "Issuer id of the Server API key (default: none; required with server_api_key)."),
        .init("apple_connect_timeout_ms", default: "3000", "Connect timeout for calls to Apple."),
        .init("apple_request_timeout_ms", default: "15000", "Total timeout of one call to Apple."),
        .init(
            "max_in_flight", default: "10000",
            "Jobs held at most by one worker; partitions are paused above it (bounds memory)."),
        .init(
            "job_deadline_s", default: "600",
            "How long a job may wait for Apple before it ends unverifiable/apple_unavailable."),
        .init(
            "ledger_retry_overdue_s", default: "120",
            "How long a job may retry a failing ledger operation before /readyz reports ledger_retry_overdue and "
                + "verify_ledger_retry_overdue_jobs counts it (it goes on retrying)."),
        .init("apple_max_concurrency", default: "512", "Ceiling of the adaptive limit on concurrent Apple calls."),
        .init("apple_min_concurrency", default: "4", "Floor of the adaptive limit on concurrent Apple calls."),
        .init("verify_receipt_rate", default: "1000", "Operator ceiling on verifyReceipt calls per second per worker."),
        .init(
            "server_api_rate", default: "50",
            "App Store Server API lookups (transaction info, history, statuses) per second (Apple's production "
                + "limit); the other endpoints get Apple's limit scaled by server_api_rate / 50."),
        .init("retry_budget_ratio", default: "0.1", "Retries allowed as a share of first attempts."),
        .init(
            "google_play_api_url", default: "https://androidpublisher.googleapis.com",
            "Base URL of the Google Play Developer API (https://, or http:// to loopback for a local simulator)."),
        .init(
            "google_play_token_url", default: "https://oauth2.googleapis.com/token",
            "Google's OAuth 2.0 token URL, where the service account's signed assertion buys an access token."),
        .init(
            "google_play_daily_quota", default: "200000",
            "Google Play Developer API calls per day (ending at midnight Pacific time) this worker may make: "
                + "Google's default quota per project; with several workers, give each its share."),
        .init(
            "google_play_minute_quota", default: "3000",
            "Google Play Developer API calls per minute per quota bucket (Subscriptions, One-time Purchases) this "
                + "worker may make: Google's default per bucket; with several workers, give each its share."),
        .init(
            "google_play_refund_review_answers", default: "false",
            "Answer each Google Play pending refund review notification with one orders.reviewrefund call, within "
                + "Google's 24 hours, built from the ledger (delivered or not, the share of a subscription period "
                + "used) and play_products (refund_preference, sample_content_provided). Needs play_apps."),
        .init(
            "coalesce_apple_calls", default: "true",
            "Jobs carrying the same receipt or transaction id at once share one Apple call (in the worker, and "
                + "across workers through a lease in the ledger); false: every job asks Apple itself."),
        .init(
            "verification_lease_ms", default: "10000",
            "How long a worker holds the ledger lease on a receipt it asks Apple about, and keeps Apple's answer "
                + "there for the other workers; 0: share answers within the worker only."),
        .init(
            "finish_transactions", default: "false",
            "Call the App Store Server API's Finish Transaction for each granted transaction once its grant is durable "
                + "(ledger committed, verdict delivered): once per transaction across workers and redeliveries, in "
                + "the background, never changing a verdict. Needs server_api_key."),
        .init(
            "consumption_answers", default: "false",
            "Answer each CONSUMPTION_REQUEST notification with one Send Consumption Information call built from the "
                + "ledger (delivery status) and the catalog (refund_preference, sample_content_provided). Needs "
                + "server_api_key."),
        .init(
            "consumption_customer_consented", default: "false",
            "Whether customers consented to sharing consumption data (the operator's policy). Apple refuses answers "
                + "without consent: when false, no answer is sent and the ledger records it as not_sent. The refund "
                + "policy file may set it per app (customer_consented)."),
        .init(
            "refund_policy_file",
            "JSON refund policy file (default: none: the catalog's refund_preference fields, then data only; "
                + "docs/REFUNDS.md): rules evaluated top-down that answer each consumption request (consumption_answers) and "
                + "Google Play refund review (google_play_refund_review_answers) with full_refund, prorated_refund, "
                + "no_refund, data_only or no_response. Checked at start: a fault stops the worker with one line."),
        .init(
            "consumption_lookup_url",
            "The operator's consumption lookup (default: none: the units of a one-time product consumed stay "
                + "unknown; docs/REFUNDS.md): GET URL?store=&app=&product_id=&transaction_id=&account_id= answered "
                + "{\"units_consumed\": N, \"units_purchased\": M}, asked when a consumption answer, a Google Play "
                + "refund review answer or refund-policy explain is built for a one-time product. https://, or http:// "
                + "to a loopback host; TLS is always verified."),
        .init(
            "consumption_lookup_token_file",
            "File whose content is sent to consumption_lookup_url as Authorization: Bearer (default: none: no "
                + "Authorization header). Read at start; never logged."),
        .init(
            "consumption_lookup_timeout_ms", default: "2000",
            "Total timeout of one consumption lookup (1 to 60000); a timeout puts the answer back for a retry."),
        .init(
            "set_app_account_tokens", default: "false",
            "Tag each purchase granted to a job without app_account_token with the owner's derived token "
                + "(uuid5(NAMESPACE_URL, \"app-account-token:\" + account_id)) through Set App Account Token, once per "
                + "original transaction, in the background. Needs server_api_key."),
        .init(
            "follow_up_claim_lease_s", default: "300",
            "How long a worker's claim on a follow-up call (finish, consumption answer, account token, Google Play "
                + "acknowledge or consume) holds: a worker that died with claimed calls leaves them to another "
                + "worker's sweep once this has passed."),
        .init(
            "follow_up_sweep_interval_s", default: "30",
            "How often each worker sweeps the ledger for follow-up calls that are due (put back, or left by a worker "
                + "that died), and reads the age of the oldest Google Play purchase not yet acknowledged."),
        .init("drain_timeout_s", default: "25", "On SIGTERM, how long in-flight jobs may take before release."),
        .init(
            "delivery_timeout_s", default: "120",
            "How long a verdict or dead letter may go without a delivery report with an offset before /readyz says "
                + "output_undeliverable; its job stays uncommitted and delivery goes on."),
        .init("metrics_port", default: "9464", "Port of /metrics, /healthz and /readyz."),
        .init("metrics_host", default: "0.0.0.0", "Address the metrics port binds to."),
        .logLevel,
        .logFormat,
        EnvironmentVariables.ignoreKey,
    ]

    /// The worker's key table (Operations' generic configuration reading, references and help).
    public static let table = ConfigurationTable(command: "verify-worker run", keys: keys)

    public static func key(named name: String) -> ConfigurationKey? { table.key(named: name) }

    /// The name a file or environment entry is stored under: the key's name, or `<secret>_file` for the path of a
    /// secret's file. Nil for names that are not configuration.
    public static func storageName(environmentName: String) -> String? {
        table.storageName(environmentName: environmentName)
    }

    /// The configuration reference as Markdown: the text of `docs/CONFIGURATION.md`, generated from ``keys`` so the
    /// two cannot drift apart (a test compares them).
    public static func referenceMarkdown() -> String { table.referenceMarkdown(heading: "# Configuration reference") }

    /// Reads `--flag value` and `--flag=value` pairs into key names. Throws ``ConfigurationError`` for a flag that
    /// is not a key or that lacks its value.
    public static func parseFlags(
        _ arguments: [String]
    ) throws(ConfigurationError) -> (flags: [String: String], configFile: String?) {
        try table.parseFlags(arguments)
    }

    /// Builds the configuration from merged sources, validating every value. The first problem is thrown as one
    /// line naming the key.
    public init(
        _ sources: ConfigurationSources, hostName: String = ProcessInfo.processInfo.hostName,
        readFile: @escaping (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) {
        let reader = ConfigurationReader(sources: sources, readFile: readFile)
        brokers = try reader.string("brokers")
        groupID = try reader.string("group_id")
        jobsTopic = try reader.string("jobs_topic")
        verdictsTopic = try reader.string("verdicts_topic")
        deadLetterTopic = try reader.string("dead_letter_topic")
        controlTopic = try reader.string("control_topic")
        kafkaProperties = try reader.properties("kafka_properties")
        kafkaPrefetchKilobytes = try reader.int("kafka_prefetch_kbytes", in: 1...2_097_151)
        workerID = sources.values["worker_id"] ?? hostName
        ledgerURL = try reader.string("ledger_url")
        guard
            ledgerURL.hasPrefix("postgres://") || ledgerURL.hasPrefix("postgresql://") || ledgerURL.hasPrefix("sqlite:")
        else {
            throw ConfigurationError(key: "ledger_url", problem: "must start with postgres:// or sqlite:")
        }
        guard let catalogFile = sources.values["catalog_file"], !catalogFile.isEmpty else {
            throw ConfigurationError(
                key: "catalog_file", problem: "required (set VERIFY_CATALOG_FILE or --catalog-file)")
        }
        self.catalogFile = catalogFile
        trustAnchorFiles = sources.values["trust_anchors"].map(Self.list) ?? []
        allowSandbox = try reader.bool("allow_sandbox")
        allowXcode = try reader.bool("allow_xcode")
        if let text = sources.values["apple_app_apple_id"], !text.isEmpty {
            guard let id = Int64(text), id > 0 else {
                throw ConfigurationError(key: "apple_app_apple_id", problem: "must be a positive whole number")
            }
            appleAppAppleID = id
        } else {
            appleAppAppleID = nil
        }
        maximumMessageBytes = try reader.int("max_message_bytes", in: 1024...(64 << 20))
        maximumReceiptBytes = try reader.int("max_receipt_bytes", in: 1024...(64 << 20))
        // Not tied to max_message_bytes: a message too large to be dead-lettered whole is dead-lettered cut. The floor
        // leaves room for a verdict and for a dead letter's headers and key.
        maximumProduceBytes = try reader.int("max_produce_bytes", in: 16_384...(64 << 20))
        verifyReceiptProductionURL = try reader.url("verify_receipt_production_url")
        verifyReceiptSandboxURL = try reader.url("verify_receipt_sandbox_url")
        serverAPIProductionURL = try reader.url("server_api_production_url")
        serverAPISandboxURL = try reader.url("server_api_sandbox_url")
        allowHTTPAppleURLs = try reader.bool("allow_http_apple_urls")
        if !allowHTTPAppleURLs {
            // What each URL would carry in clear: verifyReceipt's body holds the shared secret, every Server API
            // request a bearer token signed with the Server API key.
            let sharedSecret = "the shared secret"
            let serverAPIToken = "the Server API's bearer token (signed with server_api_key)"
            for (name, value, exposed) in [
                ("verify_receipt_production_url", verifyReceiptProductionURL, sharedSecret),
                ("verify_receipt_sandbox_url", verifyReceiptSandboxURL, sharedSecret),
                ("server_api_production_url", serverAPIProductionURL, serverAPIToken),
                ("server_api_sandbox_url", serverAPISandboxURL, serverAPIToken),
            ] where !Self.isSafeAppleURL(value) {
                throw ConfigurationError(
                    key: name,
                    problem: "http:// to a host that is not loopback would send \(exposed) in clear "
                        + "(use https://, or set allow_http_apple_urls=true for a development simulator)")
            }
        }
        caBundle = sources.values["ca_bundle"]
        sharedSecret = try reader.secret("shared_secret").map(Secret.init)
        serverAPIKey = try reader.secret("server_api_key").map(Secret.init)
        serverAPIKeyID = sources.values["server_api_key_id"]
        serverAPIIssuerID = sources.values["server_api_issuer_id"]
        appleConnectTimeout = .milliseconds(try reader.int("apple_connect_timeout_ms", in: 1...600_000))
        appleRequestTimeout = .milliseconds(try reader.int("apple_request_timeout_ms", in: 1...600_000))
        maximumInFlight = try reader.int("max_in_flight", in: 1...1_000_000)
        jobDeadline = .seconds(try reader.int("job_deadline_s", in: 1...86_400))
        ledgerRetryOverdue = .seconds(try reader.int("ledger_retry_overdue_s", in: 1...86_400))
        appleMaximumConcurrency = try reader.int("apple_max_concurrency", in: 1...100_000)
        appleMinimumConcurrency = try reader.int("apple_min_concurrency", in: 1...100_000)
        guard appleMinimumConcurrency <= appleMaximumConcurrency else {
            throw ConfigurationError(key: "apple_min_concurrency", problem: "must not exceed apple_max_concurrency")
        }
        verifyReceiptRatePerSecond = try reader.double("verify_receipt_rate", in: 0.1...1_000_000)
        serverAPIRatePerSecond = try reader.double("server_api_rate", in: 0.1...100_000)
        googlePlayAPIURL = try reader.url("google_play_api_url")
        googlePlayTokenURL = try reader.url("google_play_token_url")
        for (name, value) in [
            ("google_play_api_url", googlePlayAPIURL), ("google_play_token_url", googlePlayTokenURL),
        ] where !Self.isSafeAppleURL(value) {
            // Every call carries an access token, every token request a signed assertion.
            throw ConfigurationError(
                key: name, problem: "must be https://, or http:// to a loopback host (a local simulator)")
        }
        googlePlayDailyQuota = try reader.int("google_play_daily_quota", in: 1...1_000_000_000)
        googlePlayMinuteQuota = try reader.int("google_play_minute_quota", in: 1...10_000_000)
        googlePlayRefundReviewAnswers = try reader.bool("google_play_refund_review_answers")
        retryBudgetRatio = try reader.double("retry_budget_ratio", in: 0...1)
        coalesceAppleCalls = try reader.bool("coalesce_apple_calls")
        verificationLease = .milliseconds(try reader.int("verification_lease_ms", in: 0...600_000))
        finishTransactions = try reader.bool("finish_transactions")
        consumptionAnswers = try reader.bool("consumption_answers")
        consumptionCustomerConsented = try reader.bool("consumption_customer_consented")
        refundPolicyFile = sources.values["refund_policy_file"].flatMap { $0.isEmpty ? nil : $0 }
        (consumptionLookupURL, consumptionLookupToken) = try Self.consumptionLookup(sources, readFile: readFile)
        consumptionLookupTimeout = .milliseconds(try reader.int("consumption_lookup_timeout_ms", in: 1...60_000))
        setAppAccountTokens = try reader.bool("set_app_account_tokens")
        followUpClaimLease = .seconds(try reader.int("follow_up_claim_lease_s", in: 1...86_400))
        followUpSweepInterval = .seconds(try reader.int("follow_up_sweep_interval_s", in: 1...3_600))
        drainTimeout = .seconds(try reader.int("drain_timeout_s", in: 1...3600))
        deliveryTimeout = .seconds(try reader.int("delivery_timeout_s", in: 1...86_400))
        metricsPort = try reader.int("metrics_port", in: 0...65535)
        metricsHost = try reader.string("metrics_host")
        logLevel = try reader.oneOf("log_level", ["trace", "debug", "info", "notice", "warning", "error", "critical"])
        logFormat = try reader.oneOf("log_format", ["json", "text"])
        // With apps in the catalog, each app names its own key; the start checks that one has one.
        if serverAPIKey == nil, finishTransactions || consumptionAnswers || setAppAccountTokens,
            !Self.catalogListsApps(catalogFile, readFile: readFile)
        {
            throw ConfigurationError(
                key: finishTransactions
                    ? "finish_transactions" : consumptionAnswers ? "consumption_answers" : "set_app_account_tokens",
                problem: "needs the App Store Server API (server_api_key, server_api_key_id, server_api_issuer_id)")
        }
        if serverAPIKey != nil, serverAPIKeyID == nil || serverAPIIssuerID == nil {
            throw ConfigurationError(
                key: serverAPIKeyID == nil ? "server_api_key_id" : "server_api_issuer_id",
                problem: "required when server_api_key is set")
        }
    }

    /// The consumption lookup's URL and token. The URL follows Google Play's rule (https://, or http:// to loopback):
    /// every lookup may carry the bearer token and names a customer's purchase. The token file is read here, so that a
    /// missing or empty one stops the start rather than the first refund answer.
    static func consumptionLookup(
        _ sources: ConfigurationSources, readFile: (String) throws -> String
    ) throws(ConfigurationError) -> (url: String?, token: Secret?) {
        try consumptionLookup(
            url: sources.values["consumption_lookup_url"], tokenFile: sources.values["consumption_lookup_token_file"],
            readFile: readFile)
    }

    /// The consumption lookup's URL and token from the two settings' values (`refund-policy explain` reads them from
    /// its options), checked as the worker checks them at start.
    public static func consumptionLookup(
        url: String?, tokenFile: String?, readFile: (String) throws -> String
    ) throws(ConfigurationError) -> (url: String?, token: Secret?) {
        let url = url.flatMap { $0.isEmpty ? nil : $0 }
        if let url {
            guard ConfigurationReader.isHTTPURL(url), URL(string: url)?.fragment == nil else {
                throw ConfigurationError(key: "consumption_lookup_url", problem: "expected an http(s) URL")
            }
            guard isSafeAppleURL(url) else {
                throw ConfigurationError(
                    key: "consumption_lookup_url",
                    problem: "must be https://, or http:// to a loopback host (a local backend)")
            }
        }
        guard let path = tokenFile, !path.isEmpty else { return (url, nil) }
        guard url != nil else {
            throw ConfigurationError(key: "consumption_lookup_token_file", problem: "needs consumption_lookup_url")
        }
        let text: String
        do {
            text = try readFile(path)
        } catch {
            throw ConfigurationError(key: "consumption_lookup_token_file", problem: "cannot read the file")
        }
        // Editors and `kubectl create secret` leave a trailing newline; it is not part of the token.
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else {
            throw ConfigurationError(key: "consumption_lookup_token_file", problem: "file is empty")
        }
        guard !token.contains(where: { $0.isNewline || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } ?? false })
        else {
            // A header value cannot hold a line break or a control character.
            throw ConfigurationError(
                key: "consumption_lookup_token_file", problem: "the token must be one line without control characters")
        }
        return (url, Secret(token))
    }

    /// Whether the catalog file lists `apps` (several apps). False when it cannot be read or parsed: the start reports
    /// that with the catalog's own error.
    public static func catalogListsApps(_ path: String, readFile: (String) throws -> String) -> Bool {
        guard let text = try? readFile(path), let catalog = try? Catalog.load(json: Data(text.utf8)) else {
            return false
        }
        return !catalog.apps.isEmpty
    }

    /// An Apple URL that keeps secrets off the network: `https://`, or `http://` to this machine (loopback).
    static func isSafeAppleURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else { return false }
        if scheme == "https" { return true }
        guard scheme == "http", var host = url.host?.lowercased() else { return false }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" || host == "::1" { return true }
        // 127.0.0.0/8, written as four decimal numbers.
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    static func list(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// A secret value (shared secret, private key). Its description never shows the value, so it cannot leak through
/// string interpolation into a log line or an error.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself; read it only where it is used.
    public let value: String

    public init(_ value: String) { self.value = value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

extension ConfigurationSources {
    /// Sources for the worker's keys (``WorkerConfiguration/keys``).
    public init() { self.init(table: WorkerConfiguration.table) }
}
