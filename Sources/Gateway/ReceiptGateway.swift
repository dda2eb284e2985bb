import Foundation
import Hummingbird
import Kafka
import Logging
import Messages
import Observability
import Operations
import ServiceLifecycle
import StoreHTTP
import Synchronization
import UnixSignals

/// The gateway of `verify-worker gateway`: a small HTTP server that turns requests into jobs on
/// `receipt-jobs` and answers only once Kafka acknowledged them.
///
/// - `POST /v1/receipts`: a frontend's job (the `receipt-job/v1` JSON; `job_id` and `schema` may be left out),
///   with `Authorization: Bearer <token>`, answered `202 {"job_id": …}` after the delivery report. Job ids and
///   the account of the notification namespace are refused.
/// - `POST /apple/notifications`: an App Store Server Notifications V2 body `{"signedPayload": …}` (no token:
///   Apple sends none; its signature and chain are verified instead), answered `200` after the delivery report
///   and `5xx` otherwise, so that Apple retries. The job id comes from the notification's `notificationUUID`, so
///   a retry is the same job.
/// - `POST /google-play/notifications` (only when the Pub/Sub settings are given; 404 otherwise): a Cloud Pub/Sub
///   push of a Google Play Real-time developer notification, authenticated by the push subscription's OIDC token
///   (``PubSubTokenVerifier``; 401 `unauthenticated` naming the failed check), answered `200 {"job_id"}` after the
///   delivery report and `503` otherwise, so that Pub/Sub delivers again; the job id comes from the `messageId`, so
///   a redelivery is the same job. A push that can never make a job is acknowledged `200 {"discarded": reason}` and
///   counted, never published (``GooglePlayPushIntake``).
///
/// Errors are `{"error": code, "message": …}` with 400 (bad JSON or fields), 401 (no accepted token), 403
/// (untrusted signature), 413 (too large for the body limit or for a Kafka record), 415 (not JSON), 500 (Kafka refused
/// the job for good) or 503 (Kafka did not acknowledge; retry with the same `job_id`). No body, proof or token is ever
/// logged. Another method on these routes is 405 with `Allow`, another path 404.
/// `/healthz`, `/readyz` and `/metrics` are served on the operations port.
public final class ReceiptGateway: Sendable {
    public let configuration: GatewayConfiguration
    private let intake: JobIntake
    private let publisher: any JobPublishing
    private let readiness: @Sendable () -> Readiness
    private let ownedProducer: KafkaProducer?
    private let operations: OperationsServer
    private let logger: Logger
    private let listening = OneShot<Int?>()
    /// The service group of `run`, for a stop from inside (the producer failed for good).
    private let group = Mutex<ServiceGroup?>(nil)
    private let stopping: StopFlag
    /// Set while `run` handles SIGTERM itself, so a fatal Kafka error can ask for a graceful stop.
    private let handlesSignals = StopFlag()
    /// The producer's fatal error, if it has one (the gateway then stops: only a new process recovers).
    private let producerFatalError: @Sendable () -> (any Error)?
    /// The accepted bearer tokens of `/v1/receipts`; nil when authentication is disabled.
    private let tokens: BearerTokens?
    private let notificationCheck: NotificationSignatureCheck
    /// Google Play's Pub/Sub pushes: the token check (nil when the route is off) and the envelope's reading.
    private let pushVerifier: PubSubTokenVerifier?
    private let pushIntake: GooglePlayPushIntake
    /// The HTTP client that fetches Google's token keys, when the gateway made one (shut down with the gateway).
    private let keysEngine: CurlHTTPEngine?
    /// Asks the brokers once a second, for readiness (nil for a publisher of the caller's).
    private let brokerProbe: (@Sendable () async -> Void)?

    /// The routes' labels in metrics.
    enum Route {
        static let receipts = "receipts"
        static let notifications = "notifications"
        static let googlePlayNotifications = "google_play_notifications"
    }

    /// A gateway over a publisher of the caller's (tests, other transports). Reads the tokens file and the trust
    /// anchors the configuration names.
    ///
    /// `now` is the clock of push tokens' `exp`/`iat` and of the key set's age; `keyTransport` fetches a JWK set URL
    /// (default: a libcurl client of the gateway's own).
    public convenience init(
        configuration: GatewayConfiguration, publisher: any JobPublishing, logger: Logger,
        readiness: @escaping @Sendable () -> Readiness = { .ready }, keyTransport: (any HTTPTransport)? = nil,
        now: @escaping @Sendable () -> Date = Date.init
    ) throws(ConfigurationError) {
        try configuration.validate()
        let (verifier, engine) = try Self.pushVerifier(configuration, transport: keyTransport, now: now)
        self.init(
            configuration: configuration, publisher: publisher, ownedProducer: nil, logger: logger,
            readiness: readiness, fatalError: { nil }, tokens: try configuration.loadTokens(logger: logger),
            notificationCheck: NotificationSignatureCheck(trust: try configuration.loadTrustStore()), brokerProbe: nil,
            pushVerifier: verifier, keysEngine: engine, now: now)
    }

    /// The push token check the configuration asks for, and the HTTP client made for its key set URL, if any.
    private static func pushVerifier(
        _ configuration: GatewayConfiguration, transport: (any HTTPTransport)?, now: @escaping @Sendable () -> Date
    ) throws(ConfigurationError) -> (PubSubTokenVerifier?, CurlHTTPEngine?) {
        guard configuration.googlePlayNotificationsEnabled else { return (nil, nil) }
        var engine: CurlHTTPEngine?
        var transport = transport
        if transport == nil, configuration.pubSubJWKSURL != nil {
            do {
                // TLS peer and host verification are always on in this client.
                engine = try CurlHTTPEngine(configuration: HTTPEngineConfiguration(maximumHostConnections: 2))
            } catch {
                throw ConfigurationError(key: "gateway_pubsub_jwks_url", problem: "cannot start an HTTP client")
            }
            transport = engine
        }
        guard let keys = try configuration.loadPubSubKeySet(transport: transport, now: now),
            let audience = configuration.pubSubAudience, let serviceAccount = configuration.pubSubServiceAccount
        else { return (nil, engine) }
        let verifier = PubSubTokenVerifier(
            keys: keys, audience: audience, serviceAccount: serviceAccount,
            clockSkew: .seconds(configuration.pubSubClockSkewSeconds), now: now)
        return (verifier, engine)
    }

    /// A gateway with its own idempotent producer to `configuration.brokers`, flushed and closed when `run` ends.
    /// - Throws: ``ConfigurationError`` for a setting it cannot run with (a missing tokens file, an
    ///   unreadable trust anchor, a Kafka property librdkafka refuses).
    public convenience init(configuration: GatewayConfiguration, logger: Logger) throws {
        try configuration.validate()
        let tokens = try configuration.loadTokens(logger: logger)
        let trust = try configuration.loadTrustStore()
        let (verifier, engine) = try Self.pushVerifier(configuration, transport: nil, now: Date.init)
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(
                configuration: configuration.producerConfiguration, logger: logger.with(label: "kafka.producer"))
        } catch {
            // The producer's typed settings are the gateway's own: what librdkafka refuses came from kafka_properties.
            throw ConfigurationError(key: "kafka_properties", problem: error.message)
        }
        let publisher = KafkaJobPublisher(
            producer: producer, topic: configuration.jobsTopic,
            codec: MessageCodec(maximumMessageBytes: configuration.maximumBodyBytes),
            deadline: .milliseconds(configuration.publishTimeoutMilliseconds),
            maximumRecordBytes: configuration.producerMessageMaxBytes, logger: logger)
        self.init(
            configuration: configuration, publisher: publisher, ownedProducer: producer, logger: logger,
            readiness: {
                let state = publisher.readiness
                return Readiness(isReady: state.isReady, reasons: state.reasons)
            }, fatalError: { producer.fatalError }, tokens: tokens,
            notificationCheck: NotificationSignatureCheck(trust: trust),
            brokerProbe: { await publisher.watchKafka() }, pushVerifier: verifier, keysEngine: engine, now: Date.init)
    }

    private init(
        configuration: GatewayConfiguration, publisher: any JobPublishing, ownedProducer: KafkaProducer?,
        logger: Logger, readiness: @escaping @Sendable () -> Readiness,
        fatalError: @escaping @Sendable () -> (any Error)?, tokens: BearerTokens?,
        notificationCheck: NotificationSignatureCheck, brokerProbe: (@Sendable () async -> Void)?,
        pushVerifier: PubSubTokenVerifier?, keysEngine: CurlHTTPEngine?, now: @escaping @Sendable () -> Date
    ) {
        self.pushVerifier = pushVerifier
        self.keysEngine = keysEngine
        self.pushIntake = GooglePlayPushIntake(
            accountID: configuration.googlePlayNotificationAccountID, packages: Set(configuration.googlePlayPackages),
            subscription: configuration.pubSubSubscription, maximumBytes: configuration.maximumBodyBytes, now: now)
        self.producerFatalError = fatalError
        self.tokens = tokens
        self.notificationCheck = notificationCheck
        self.brokerProbe = brokerProbe
        self.configuration = configuration
        self.intake = JobIntake(
            codec: MessageCodec(maximumMessageBytes: configuration.maximumBodyBytes),
            notificationAccountID: configuration.notificationAccountID)
        self.publisher = publisher
        self.ownedProducer = ownedProducer
        self.logger = logger
        let stopping = StopFlag()
        self.stopping = stopping
        let gatewayReadiness: @Sendable () -> Readiness = {
            if stopping.isSet { return .notReady("shutting_down") }
            return readiness()
        }
        self.readiness = gatewayReadiness
        // Its "listening" notice is left out: "gateway listening" names both ports once both listen, so a port in
        // use is the only line a failed start prints.
        var operationsLogger = logger
        operationsLogger.logLevel = max(logger.logLevel, .warning)
        self.operations = OperationsServer(
            configuration: configuration.operations, registry: MetricsBootstrap.registry(), logger: operationsLogger,
            declaredMetrics: MetricNames.names(of: [.gateway]), readiness: { gatewayReadiness() })
    }

    /// Serves until SIGTERM/SIGINT (when `handlingSignals`) or until the task is cancelled. On a signal the HTTP
    /// server stops accepting, finishes the requests in flight (each waits for its delivery report), then the
    /// producer is flushed for up to the drain timeout and closed.
    ///
    /// When the producer fails for good (librdkafka's fatal error), the gateway stops the same way and `run` throws
    /// that error, so the process exits non-zero and its supervisor starts a fresh one.
    public func run(handlingSignals: Bool = true) async throws {
        if handlingSignals { handlesSignals.set() }
        if tokens == nil {
            logger.warning(
                """
                gateway: bearer tokens disabled (VERIFY_GATEWAY_AUTH=disabled): anyone who reaches POST /v1/receipts \
                can submit jobs; for development only
                """)
        }
        let listening = self.listening
        let application = Application(
            router: makeRouter(),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil, backlog: 1024),
            onServerRunning: { channel in listening.resolve(channel.localAddress?.port ?? 0) },
            logger: logger)
        let operations = self.operations
        let stopping = self.stopping
        // One group, its reverse order the shutdown order: the HTTP server stops accepting and finishes the requests
        // in flight (each waits for its delivery report), then the broker watch and the operations port stop, and
        // the producer is flushed and closed last.
        var services: [any Service] = []
        if let producer = ownedProducer {
            services.append(
                ProducerService(
                    producer: producer, flushTimeout: nil, closeTimeout: .seconds(configuration.drainTimeoutSeconds),
                    logger: logger))
        }
        services.append(
            OperationsService(
                server: operations, host: configuration.operations.host, port: configuration.operations.port))
        if let brokerProbe { services.append(BackgroundService(name: "broker-watch", work: brokerProbe)) }
        services.append(GatewayHTTPService(application: application, operations: operations, stopping: stopping))
        let group = ServiceGroup.command(
            services, signals: handlingSignals ? [.sigterm, .sigint] : [], logger: logger)
        self.group.withLock { $0 = group }
        var failure: (any Error)?
        do {
            try await group.run()
        } catch {
            failure = error
        }
        stopping.set()
        listening.resolve(nil)
        let neverListened = await waitUntilListening() == nil
        if let producer = ownedProducer {
            await producer.shutdown(timeout: .seconds(configuration.drainTimeoutSeconds))
        }
        keysEngine?.shutdown()
        if let failure = failure as? ConfigurationError { throw failure }
        if let failure, !(failure is CancellationError), neverListened {
            // The server ended without ever listening: its port is taken or cannot be bound.
            throw ConfigurationError(
                key: "port", problem: "cannot listen on \(configuration.host):\(configuration.port)")
        }
        logger.info("gateway stopped")
        if let fatal = producerFatalError() { throw fatal }
        if let failure, !(failure is CancellationError) { throw failure }
    }

    /// The bound HTTP port once the server listens; nil if it stopped or failed first.
    public func waitUntilListening() async -> Int? { await listening.wait() ?? nil }

    /// The bound operations port once it listens.
    public func waitUntilOperationsListening() async -> Int? { await operations.waitUntilListening() }

    private func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        // Another method on these paths gets 405 with Allow, another path 404, both with a JSON error.
        var methods: [String: [HTTPRequest.Method]] = ["v1/receipts": [.post], "apple/notifications": [.post]]
        if pushVerifier != nil { methods["google-play/notifications"] = [.post] }
        router.add(middleware: RouteFallbackMiddleware(methods: methods))
        router.post("v1/receipts") { request, _ in
            await self.handle(request, route: Route.receipts, requiresToken: true) {
                (intake: JobIntake, body: [UInt8]) throws(GatewayError) -> ReceiptJob in
                try intake.job(fromFrontendJSON: body)
            } answer: { job, _ in
                (202, GatewayJSON.encode(["job_id": job.jobID]))
            }
        }
        router.post("apple/notifications") { request, _ in
            await self.handle(request, route: Route.notifications) {
                [notificationCheck = self.notificationCheck] (
                    intake: JobIntake, body: [UInt8]
                ) throws(GatewayError)
                    -> ReceiptJob in
                let job = try intake.job(fromNotificationJSON: body)
                // Before any Kafka write: a post that Apple did not sign costs a signature check, nothing more.
                if case .notification(let signedPayload) = job.proof { try notificationCheck.check(signedPayload) }
                return job
            } answer: { job, _ in
                (200, GatewayJSON.encode(["job_id": job.jobID]))
            }
        }
        if let pushVerifier {
            router.post("google-play/notifications") { request, _ in
                await self.handleGooglePlayPush(request, verifier: pushVerifier)
            }
        }
        return router
    }

    /// One Pub/Sub push: the token first (a push without a valid one costs no body read and publishes nothing), then
    /// the envelope: a job published and acknowledged after its delivery report, or a push that can never make a job
    /// acknowledged and counted. No content-type check: a push is judged by its body, and a refusal Pub/Sub cannot
    /// fix would only make it deliver the same push for days.
    private func handleGooglePlayPush(_ request: Request, verifier: PubSubTokenVerifier) async -> Response {
        let start = ContinuousClock.now
        let route = Route.googlePlayNotifications
        var request = request
        do throws(GatewayError) {
            do {
                try await verifier.verify(authorization: request.headers[.authorization])
            } catch let failure as PubSubTokenVerifier.Failure {
                throw GatewayError(.unauthenticated, field: "authorization", failure.rawValue)
            } catch {
                throw GatewayError(.keysUnavailable, "Google's token keys could not be read")
            }
            let body: [UInt8]
            do throws(GatewayError) {
                body = try await Self.readBody(&request, limit: configuration.maximumBodyBytes)
            } catch  where error.code == .tooLarge {
                return discarded(.tooLarge, route: route, since: start)
            }
            switch try pushIntake.outcome(of: body) {
            case .discard(let reason):
                return discarded(reason, route: route, since: start)
            case .job(let job):
                let report = try await publisher.publish(job)
                GatewayMetrics.recordPublished(route: route)
                GatewayMetrics.recordPush(outcome: "accepted")
                logger.debug(
                    "google play notification published",
                    metadata: [
                        LogKeys.jobID: "\(job.jobID)", LogKeys.partition: "\(report.topicPartition.partition)",
                        LogKeys.offset: "\(report.offset)",
                    ])
                GatewayMetrics.recordAnswer(route: route, status: 200, since: start)
                return Self.json(200, GatewayJSON.encode(["job_id": job.jobID]))
            }
        } catch {
            GatewayMetrics.recordPush(outcome: error.httpStatus == 401 ? "refused" : "failed")
            return failed(error, route: route, since: start, subject: "google play push")
        }
    }

    /// A push acknowledged without a job: counted by reason and logged without its content.
    private func discarded(
        _ reason: GooglePlayPushIntake.Discard, route: String, since start: ContinuousClock.Instant
    ) -> Response {
        GatewayMetrics.recordDiscarded(reason: reason.rawValue)
        GatewayMetrics.recordPush(outcome: "discarded")
        GatewayMetrics.recordAnswer(route: route, status: 200, since: start)
        logger.notice("google play push discarded", metadata: [LogKeys.reason: "\(reason.rawValue)"])
        return Self.json(200, GatewayJSON.encode(["discarded": reason.rawValue]))
    }

    /// The request's body, up to `limit` bytes (`tooLarge` past it, with or without `Content-Length`).
    private static func readBody(_ request: inout Request, limit: Int) async throws(GatewayError) -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw GatewayError(.tooLarge, "\(length) bytes, limit \(limit)")
        }
        do {
            let buffer = try await request.collectBody(upTo: limit)
            return buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? []
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            // A chunked body has no Content-Length: Hummingbird stops reading at the limit (NIOTooManyBytesError).
            throw GatewayError(.tooLarge, "the body is larger than \(limit) bytes")
        } catch {
            throw GatewayError(.notJSON, "the body could not be read")
        }
    }

    /// One request: content type, size, job, publish, answer. Everything that goes wrong becomes a JSON error.
    private func handle(
        _ request: Request, route: String, requiresToken: Bool = false,
        makeJob: (JobIntake, [UInt8]) throws(GatewayError) -> ReceiptJob,
        answer: (ReceiptJob, KafkaDeliveryReport) -> (Int, [UInt8])
    ) async -> Response {
        let start = ContinuousClock.now
        var request = request
        do throws(GatewayError) {
            // First of all: a request without a token costs no body read.
            if requiresToken, let tokens {
                guard let token = BearerTokens.token(fromAuthorization: request.headers[.authorization]) else {
                    throw GatewayError(.unauthorized, "an Authorization: Bearer token is required")
                }
                guard tokens.accepts(token) else {
                    throw GatewayError(.unauthorized, "the bearer token is not accepted")
                }
            }
            guard Self.isJSON(request.headers[.contentType]) else {
                throw GatewayError(.unsupportedMediaType, "Content-Type must be application/json")
            }
            let body = try await Self.readBody(&request, limit: configuration.maximumBodyBytes)
            let job = try makeJob(intake, body)
            let report = try await publisher.publish(job)
            GatewayMetrics.recordPublished(route: route)
            logger.debug(
                "job published",
                metadata: [
                    LogKeys.jobID: "\(job.jobID)", LogKeys.httpRoute: "\(route)",
                    LogKeys.partition: "\(report.topicPartition.partition)", LogKeys.offset: "\(report.offset)",
                ])
            let (status, bytes) = answer(job, report)
            GatewayMetrics.recordAnswer(route: route, status: status, since: start)
            return Self.json(status, bytes)
        } catch {
            return failed(error, route: route, since: start, subject: "request")
        }
    }

    /// The JSON answer to a request that failed with `error`, counted and logged (`subject` names the request in the
    /// log line): a warning for the gateway's own failure (5xx, after which a producer failed for good stops the
    /// gateway); a debug line for a refusal, since a flood of bad or forged requests must not flood the log (the
    /// metrics count them). A 401 names the scheme it wants.
    private func failed(
        _ error: GatewayError, route: String, since start: ContinuousClock.Instant, subject: String
    ) -> Response {
        GatewayMetrics.recordError(route: route, error)
        GatewayMetrics.recordAnswer(route: route, status: error.httpStatus, since: start)
        if error.httpStatus >= 500 {
            logger.warning(
                "\(subject) not accepted", metadata: [LogKeys.httpRoute: "\(route)", LogKeys.error: "\(error.code)"])
            stopIfKafkaFailedForGood()
        } else {
            logger.debug(
                "\(subject) refused",
                metadata: [
                    LogKeys.httpRoute: "\(route)", LogKeys.error: "\(error.code)", LogKeys.reason: "\(error.message)",
                ])
        }
        var response = Self.json(error.httpStatus, error.jsonBody)
        if error.httpStatus == 401 { response.headers[.wwwAuthenticate] = "Bearer" }
        return response
    }

    /// A producer in librdkafka's fatal state never recovers: stop gracefully (finishing other requests) so the
    /// process exits non-zero and is replaced.
    private func stopIfKafkaFailedForGood() {
        guard let fatal = producerFatalError(), handlesSignals.isSet, !stopping.isSet else { return }
        logger.critical("kafka producer failed for good; stopping the gateway", metadata: [LogKeys.error: "\(fatal)"])
        stopping.set()
        let group = self.group.withLock { $0 }
        Task { await group?.triggerGracefulShutdown() }
    }

    /// `application/json`, with or without parameters (`; charset=utf-8`).
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    static func json(_ status: Int, _ body: [UInt8]) -> Response {
        var bytes = body
        bytes.append(UInt8(ascii: "\n"))
        return Response(
            status: HTTPResponse.Status(code: status), headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

extension Logger {
    /// A copy with another label (swift-log labels are fixed at creation; metadata and level are kept).
    func with(label: String) -> Logger {
        var copy = Logger(label: label)
        copy.logLevel = logLevel
        return copy
    }
}

/// The HTTP server (Hummingbird's `Application`, itself a service): started once the operations port listens; on
/// graceful shutdown it stops accepting and finishes the requests in flight. `/readyz` says `shutting_down` from the
/// first moment of the stop.
struct GatewayHTTPService<Responder: HTTPResponder>: Service
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let application: Application<Responder>
    let operations: OperationsServer
    let stopping: StopFlag

    func run() async throws {
        guard await cancelWhenGracefulShutdown({ await operations.waitUntilListening() }) != nil else { return }
        try await withGracefulShutdownHandler {
            try await application.run()
        } onGracefulShutdown: {
            stopping.set()
        }
    }
}
