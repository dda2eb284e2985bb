import CRdKafka

/// Every failure of the Kafka layer: a librdkafka error code, its text and whether to retry.
///
/// `isRetryable` decides retry versus dead-letter for callers; `isFatal` means the client instance
/// is unusable (for example the idempotent producer lost its guarantees) and must be recreated;
/// `isPermanent` means this one operation can never succeed as it is (a record too large, a topic
/// that does not exist or may not be written), so retrying it only stalls whoever waits for it.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// A librdkafka `rd_kafka_resp_err_t`: negative values are local (client) errors, positive ones
    /// come from the broker.
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        init(_ err: rd_kafka_resp_err_t) { self.rawValue = err.rawValue }

        var rdKafkaValue: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

        /// librdkafka's symbolic name, e.g. `_QUEUE_FULL` or `NOT_LEADER_FOR_PARTITION`.
        public var name: String {
            self == .deliveryUnproven ? "_DELIVERY_UNPROVEN" : String(cString: rd_kafka_err2name(rdKafkaValue))
        }
        public var description: String { "\(name) (\(rawValue))" }

        public static let noError = Code(RD_KAFKA_RESP_ERR_NO_ERROR)
        public static let queueFull = Code(RD_KAFKA_RESP_ERR__QUEUE_FULL)
        public static let timedOut = Code(RD_KAFKA_RESP_ERR__TIMED_OUT)
        public static let messageTimedOut = Code(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
        public static let transport = Code(RD_KAFKA_RESP_ERR__TRANSPORT)
        public static let allBrokersDown = Code(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        public static let fatal = Code(RD_KAFKA_RESP_ERR__FATAL)
        public static let invalidArgument = Code(RD_KAFKA_RESP_ERR__INVALID_ARG)
        public static let unknownTopicOrPartition = Code(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        public static let purgedQueue = Code(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
        public static let purgedInFlight = Code(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
        public static let state = Code(RD_KAFKA_RESP_ERR__STATE)
        public static let leaderNotAvailable = Code(RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
        public static let notLeaderForPartition = Code(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
        public static let requestTimedOut = Code(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
        public static let notEnoughReplicas = Code(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
        public static let notEnoughReplicasAfterAppend = Code(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        public static let rebalanceInProgress = Code(RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS)
        public static let coordinatorNotAvailable = Code(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE)
        public static let notCoordinator = Code(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
        public static let shuttingDown = Code(RD_KAFKA_RESP_ERR__DESTROY)
        /// The consumer group has no committed offsets to commit (nothing was consumed): harmless.
        public static let noOffset = Code(RD_KAFKA_RESP_ERR__NO_OFFSET)
        public static let messageSizeTooLarge = Code(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        public static let recordListTooLarge = Code(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)
        public static let topicAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
        public static let clusterAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
        public static let unknownTopic = Code(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
        public static let unknownPartition = Code(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
        public static let invalidRecord = Code(RD_KAFKA_RESP_ERR_INVALID_RECORD)
        /// Not librdkafka's: every acknowledgement of a message came without an offset (implicitly), so nothing
        /// proves it is stored (``KafkaProducer/sendConfirmed(_:attempts:)``). Retryable: send it again. Outside
        /// librdkafka's range of codes (-200 to -100 local, 0 and up from brokers), so it never meets one of them.
        public static let deliveryUnproven = Code(rawValue: -1_000)

        /// Codes a retry can cure when librdkafka gives no `rd_kafka_error_t` to ask.
        static let transient: Set<Code> = [
            .queueFull, .timedOut, .messageTimedOut, .transport, .allBrokersDown, .leaderNotAvailable,
            .notLeaderForPartition, .requestTimedOut, .notEnoughReplicas, .notEnoughReplicasAfterAppend,
            .rebalanceInProgress, .coordinatorNotAvailable, .notCoordinator,
            Code(RD_KAFKA_RESP_ERR__WAIT_COORD), Code(RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS),
            Code(RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION), Code(RD_KAFKA_RESP_ERR__RESOLVE), .deliveryUnproven,
        ]

        /// Codes that say the record (or its batch) is larger than a limit: a smaller record may still go.
        static let recordTooLarge: Set<Code> = [
            .messageSizeTooLarge, .recordListTooLarge, Code(RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE),
        ]

        /// Codes after which the same produce can never succeed: the record is larger than the producer's
        /// `message.max.bytes` or the broker's `max.message.bytes`, it is malformed for the broker, its topic or
        /// partition does not exist, or this client may not write there. Decided here once, for every caller.
        static let permanent: Set<Code> = [
            .messageSizeTooLarge, .recordListTooLarge, .invalidRecord, .topicAuthorizationFailed,
            .clusterAuthorizationFailed, .unknownTopic, .unknownPartition, .unknownTopicOrPartition,
            Code(RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE), Code(RD_KAFKA_RESP_ERR_INVALID_MSG),
            Code(RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION), Code(RD_KAFKA_RESP_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT),
            Code(RD_KAFKA_RESP_ERR_POLICY_VIOLATION), Code(RD_KAFKA_RESP_ERR_INVALID_REQUIRED_ACKS),
            Code(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Code(RD_KAFKA_RESP_ERR__AUTHENTICATION),
            Code(RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED),
        ]
    }

    public var code: Code
    /// librdkafka's text for the failure, possibly with what this layer was doing. Never holds payloads.
    public var message: String
    /// True when the same operation may succeed later (broker down, leader moving, queue full).
    public var isRetryable: Bool
    /// True when the client instance is unusable and must be recreated (`rd_kafka_fatal_error`).
    public var isFatal: Bool
    /// True when this operation can never succeed as it is, however often it is retried (see `Code.permanent`):
    /// send something else (a smaller record) or stop. Never true together with `isRetryable` or `isFatal`.
    public var isPermanent: Bool { !isFatal && !isRetryable && Code.permanent.contains(code) }
    /// A permanent refusal because the record is too large (for the producer's `message.max.bytes` or a broker's
    /// `max.message.bytes`): a smaller record may still be accepted.
    public var isRecordTooLarge: Bool { isPermanent && Code.recordTooLarge.contains(code) }
    public var file: String
    public var line: Int

    public init(
        code: Code, message: String, isRetryable: Bool? = nil, isFatal: Bool = false,
        file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.isRetryable = isRetryable ?? (!isFatal && Code.transient.contains(code))
        self.isFatal = isFatal
        self.file = file
        self.line = line
    }

    public var description: String {
        var text = "KafkaError \(code): \(message)"
        if isFatal {
            text += " [fatal]"
        } else if isRetryable {
            text += " [retryable]"
        } else if isPermanent {
            text += " [permanent]"
        }
        return text + " (at \(file):\(line))"
    }

    /// A bare response code, with librdkafka's standard text for it.
    init(_ err: rd_kafka_resp_err_t, context: String? = nil, file: String = #fileID, line: Int = #line) {
        let text = String(cString: rd_kafka_err2str(err))
        self.init(
            code: Code(err), message: context.map { "\($0): \(text)" } ?? text,
            isFatal: err == RD_KAFKA_RESP_ERR__FATAL, file: file, line: line)
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
    static func fatalError(of handle: OpaquePointer) -> KafkaError? {
        var buffer = [CChar](repeating: 0, count: 512)
        let err = rd_kafka_fatal_error(handle, &buffer, buffer.count)
        guard err != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return KafkaError(code: Code(err), message: text, isRetryable: false, isFatal: true)
    }

    static func configuration(_ message: String, file: String = #fileID, line: Int = #line) -> KafkaError {
        KafkaError(code: .invalidArgument, message: message, isRetryable: false, file: file, line: line)
    }
}
