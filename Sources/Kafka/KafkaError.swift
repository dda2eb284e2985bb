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
        public var description: String { "\(name) (\(rawValue))" }

        // The named codes (librdkafka's values) are in RDKafka/KafkaError+RDKafka.swift, next to the C enum.

        /// Not librdkafka's: every acknowledgement of a message came without an offset (implicitly), so nothing
        /// proves it is stored (``KafkaProducer/sendConfirmed(_:attempts:)``). Retryable: send it again. Outside
        /// librdkafka's range of codes (-200 to -100 local, 0 and up from brokers), so it never meets one of them.
        public static let deliveryUnproven = Code(rawValue: -1_000)

        /// Codes a retry can cure when librdkafka gives no `rd_kafka_error_t` to ask.
        static let transient: Set<Code> = [
            .queueFull, .timedOut, .messageTimedOut, .transport, .allBrokersDown, .leaderNotAvailable,
            .notLeaderForPartition, .requestTimedOut, .notEnoughReplicas, .notEnoughReplicasAfterAppend,
            .rebalanceInProgress, .coordinatorNotAvailable, .notCoordinator,
            .waitingForCoordinator, .coordinatorLoadInProgress, .networkException, .resolve, .deliveryUnproven,
        ]

        /// Codes that say the record (or its batch) is larger than a limit: a smaller record may still go.
        static let recordTooLarge: Set<Code> = [
            .messageSizeTooLarge, .recordListTooLarge, .invalidMessageSize,
        ]

        /// Codes after which the same produce can never succeed: the record is larger than the producer's
        /// `message.max.bytes` or the broker's `max.message.bytes`, it is malformed for the broker, its topic or
        /// partition does not exist, or this client may not write there. Decided here once, for every caller.
        static let permanent: Set<Code> = [
            .messageSizeTooLarge, .recordListTooLarge, .invalidRecord, .topicAuthorizationFailed,
            .clusterAuthorizationFailed, .unknownTopic, .unknownPartition, .unknownTopicOrPartition,
            .invalidMessageSize, .invalidMessage, .topicException, .unsupportedForMessageFormat, .policyViolation,
            .invalidRequiredAcks, .transactionalIDAuthorizationFailed, .authentication, .saslAuthenticationFailed,
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

    // The initialisers from librdkafka's error values are in RDKafka/KafkaError+RDKafka.swift.

    package static func configuration(_ message: String, file: String = #fileID, line: Int = #line) -> KafkaError {
        KafkaError(code: .invalidArgument, message: message, isRetryable: false, file: file, line: line)
    }
}
