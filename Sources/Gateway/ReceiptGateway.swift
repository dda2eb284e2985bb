import Foundation
import Hummingbird
import Kafka
import Logging
import Messages
import Observability
import Operations
import ServiceLifecycle
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
    /// Asks the brokers once a second, for readiness (nil for a publisher of the caller's).
    private let brokerProbe: (@Sendable () async -> Void)?

    /// The routes' labels in metrics.
    enum Route {
        static let receipts = "receipts"
        static let notifications = "notifications"
    }

    /// A gateway over a publisher of the caller's (tests, other transports). Reads the tokens file and the trust
    /// anchors the configuration names.
    public convenience init(
        configuration: GatewayConfiguration, publisher: any JobPublishing, logger: Logger,
        readiness: @escaping @Sendable () -> Readiness = { .ready }
    ) throws(ConfigurationError) {
        try configuration.validate()
        self.init(
            configuration: configuration, publisher: publisher, ownedProducer: nil, logger: logger,
            readiness: readiness, fatalError: { nil }, tokens: try configuration.loadTokens(logger: logger),
            notificationCheck: NotificationSignatureCheck(trust: try configuration.loadTrustStore()), brokerProbe: nil)
    }

    /// A gateway with its own idempotent producer to `configuration.brokers`, flushed and closed when `run` ends.
    /// - Throws: ``ConfigurationError`` for a setting it cannot run with (a missing tokens file, an
    ///   unreadable trust anchor, a Kafka property librdkafka refuses).
    public convenience init(configuration: GatewayConfiguration, logger: Logger) throws {
        try configuration.validate()
        let tokens = try configuration.loadTokens(logger: logger)
        let trust = try configuration.loadTrustStore()
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
            brokerProbe: { await publisher.watchKafka() })
    }

    private init(
        configuration: GatewayConfiguration, publisher: any JobPublishing, ownedProducer: KafkaProducer?,
        logger: Logger, readiness: @escaping @Sendable () -> Readiness,
        fatalError: @escaping @Sendable () -> (any Error)?, tokens: BearerTokens?,
        notificationCheck: NotificationSignatureCheck, brokerProbe: (@Sendable () async -> Void)?
    ) {
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
        router.add(
            middleware: RouteFallbackMiddleware(methods: ["v1/receipts": [.post], "apple/notifications": [.post]]))
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
        return router
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
            let limit = configuration.maximumBodyBytes
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
                throw GatewayError(.tooLarge, "\(length) bytes, limit \(limit)")
            }
            let body: [UInt8]
            do {
                let buffer = try await request.collectBody(upTo: limit)
                body = buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? []
            } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
                // A chunked body has no Content-Length: Hummingbird stops reading at the limit (NIOTooManyBytesError).
                throw GatewayError(.tooLarge, "the body is larger than \(limit) bytes")
            } catch {
                throw GatewayError(.notJSON, "the body could not be read")
            }
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
            GatewayMetrics.recordError(route: route, error)
            GatewayMetrics.recordAnswer(route: route, status: error.httpStatus, since: start)
            if error.httpStatus >= 500 {
                logger.warning(
                    "request not accepted", metadata: [LogKeys.httpRoute: "\(route)", LogKeys.error: "\(error.code)"])
                stopIfKafkaFailedForGood()
            } else {
                logger.debug(
                    "request refused",
                    metadata: [
                        LogKeys.httpRoute: "\(route)", LogKeys.error: "\(error.code)",
                        LogKeys.reason: "\(error.message)",
                    ])
            }
            var response = Self.json(error.httpStatus, error.jsonBody)
            if error.code == .unauthorized { response.headers[.wwwAuthenticate] = "Bearer" }
            return response
        }
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
