import CRdKafka

extension KafkaError.Code {
    init(_ err: rd_kafka_resp_err_t) { self.init(rawValue: err.rawValue) }

    var rdKafkaValue: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

    /// librdkafka's symbolic name, e.g. `_QUEUE_FULL` or `NOT_LEADER_FOR_PARTITION`.
    public var name: String {
        self == .deliveryUnproven ? "_DELIVERY_UNPROVEN" : String(cString: rd_kafka_err2name(rdKafkaValue))
    }

    public static let noError = Self(RD_KAFKA_RESP_ERR_NO_ERROR)
    public static let queueFull = Self(RD_KAFKA_RESP_ERR__QUEUE_FULL)
    public static let timedOut = Self(RD_KAFKA_RESP_ERR__TIMED_OUT)
    public static let messageTimedOut = Self(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
    public static let transport = Self(RD_KAFKA_RESP_ERR__TRANSPORT)
    public static let allBrokersDown = Self(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
    public static let fatal = Self(RD_KAFKA_RESP_ERR__FATAL)
    public static let invalidArgument = Self(RD_KAFKA_RESP_ERR__INVALID_ARG)
    public static let unknownTopicOrPartition = Self(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    public static let purgedQueue = Self(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
    public static let purgedInFlight = Self(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
    public static let state = Self(RD_KAFKA_RESP_ERR__STATE)
    public static let leaderNotAvailable = Self(RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
    public static let notLeaderForPartition = Self(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
    public static let requestTimedOut = Self(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
    public static let notEnoughReplicas = Self(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
    public static let notEnoughReplicasAfterAppend = Self(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    public static let rebalanceInProgress = Self(RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS)
    public static let coordinatorNotAvailable = Self(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE)
    public static let notCoordinator = Self(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
    public static let shuttingDown = Self(RD_KAFKA_RESP_ERR__DESTROY)
    /// The consumer group has no committed offsets to commit (nothing was consumed): harmless.
    public static let noOffset = Self(RD_KAFKA_RESP_ERR__NO_OFFSET)
    public static let messageSizeTooLarge = Self(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
    public static let recordListTooLarge = Self(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)
    public static let topicAuthorizationFailed = Self(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
    public static let clusterAuthorizationFailed = Self(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
    public static let unknownTopic = Self(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
    public static let unknownPartition = Self(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
    public static let invalidRecord = Self(RD_KAFKA_RESP_ERR_INVALID_RECORD)

    // Named for the policy tables in KafkaError.swift (`transient`, `recordTooLarge`, `permanent`).
    static let waitingForCoordinator = Self(RD_KAFKA_RESP_ERR__WAIT_COORD)
    static let coordinatorLoadInProgress = Self(RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS)
    static let networkException = Self(RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION)
    static let resolve = Self(RD_KAFKA_RESP_ERR__RESOLVE)
    static let invalidMessageSize = Self(RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE)
    static let invalidMessage = Self(RD_KAFKA_RESP_ERR_INVALID_MSG)
    static let topicException = Self(RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION)
    static let unsupportedForMessageFormat = Self(RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT)
    static let policyViolation = Self(RD_KAFKA_RESP_ERR_POLICY_VIOLATION)
    static let invalidRequiredAcks = Self(RD_KAFKA_RESP_ERR_INVALID_REQUIRED_ACKS)
    static let transactionalIDAuthorizationFailed = Self(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    static let authentication = Self(RD_KAFKA_RESP_ERR__AUTHENTICATION)
    static let saslAuthenticationFailed = Self(RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED)
    /// What `KafkaProducer.triggerFatalErrorForTesting` raises (an idempotent producer's typical fatal error).
    static let outOfOrderSequenceNumber = Self(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER)
    /// What `KafkaConsumer.triggerFatalErrorForTesting` raises.
    static let fenced = Self(RD_KAFKA_RESP_ERR__FENCED)
}

extension KafkaError {
    /// A bare response code, with librdkafka's standard text for it.
    init(_ err: rd_kafka_resp_err_t, context: String? = nil, file: String = #fileID, line: Int = #line) {
        let text = String(cString: rd_kafka_err2str(err))
        self.init(
            code: Code(err), message: context.map { "\($0): \(text)" } ?? text,
            isFatal: err == RD_KAFKA_RESP_ERR__FATAL, file: file, line: line)
    }

    /// The code's standard text, or nil for `NO_ERROR`: how most C calls here report.
    static func check(
        _ err: rd_kafka_resp_err_t, context: String? = nil, file: String = #fileID, line: Int = #line
    ) -> KafkaError? {
        err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(err, context: context, file: file, line: line)
    }

    /// Takes ownership of an `rd_kafka_error_t` (it is destroyed here) and keeps its own verdict on
    /// retry and fatality.
    init(consuming error: OpaquePointer, context: String? = nil, file: String = #fileID, line: Int = #line) {
        defer { rd_kafka_error_destroy(error) }
        let text = String(cString: rd_kafka_error_string(error))
        self.init(
            code: Code(rd_kafka_error_code(error)), message: context.map { "\($0): \(text)" } ?? text,
            isRetryable: rd_kafka_error_is_retriable(error) != 0, isFatal: rd_kafka_error_is_fatal(error) != 0,
            file: file, line: line)
    }

    /// The client's fatal error, if one was raised (`rd_kafka_fatal_error`).
    /// Asked before every send: the text's buffer is on the stack, not an array allocated for each message.
    static func fatalError(of handle: OpaquePointer) -> KafkaError? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { buffer -> KafkaError? in
            buffer.initialize(repeating: 0)
            let err = rd_kafka_fatal_error(handle, buffer.baseAddress, buffer.count)
            guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
            let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return KafkaError(code: Code(err), message: text, isRetryable: false, isFatal: true)
        }
    }
}
