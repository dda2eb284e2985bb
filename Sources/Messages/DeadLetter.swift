/// A message from `receipt-jobs` that is not a valid job, as written to `receipt-jobs-dlq`.
///
/// The record's value is the original bytes, untouched, so nothing is lost and an operator can replay it after
/// a fix; why it was rejected travels in headers (the convention of Kafka Connect's dead-letter queues), so the
/// original payload never has to be escaped, truncated or re-encoded.
public struct DeadLetter: Sendable, Hashable {
    /// The original message value, byte for byte.
    public var original: [UInt8]
    /// The original message key, if it had one.
    public var key: [UInt8]?
    /// A stable machine code (``MessageError/Code`` raw values, or a pipeline code such as `poison`).
    public var reason: String
    /// Human-readable detail; never contains field values from the message.
    public var error: String
    /// Where the message came from.
    public var sourceTopic: String
    public var sourcePartition: Int32
    public var sourceOffset: Int64

    public init(
        original: [UInt8], key: [UInt8]?, reason: String, error: String, sourceTopic: String,
        sourcePartition: Int32, sourceOffset: Int64
    ) {
        self.original = original
        self.key = key
        self.reason = reason
        self.error = error
        self.sourceTopic = sourceTopic
        self.sourcePartition = sourcePartition
        self.sourceOffset = sourceOffset
    }

    /// Header names, shared with tools that read the dead-letter topic.
    public enum Header {
        public static let reason = "dlq.reason"
        public static let error = "dlq.error"
        public static let topic = "dlq.source.topic"
        public static let partition = "dlq.source.partition"
        public static let offset = "dlq.source.offset"
        public static let schema = "dlq.schema"
    }

    /// The schema tag of the header set.
    public static let schema = "receipt-dead-letter/v1"

    /// The Kafka headers that carry the rejection.
    public var headers: [(name: String, value: [UInt8])] {
        [
            (Header.schema, Array(Self.schema.utf8)),
            (Header.reason, Array(reason.utf8)),
            (Header.error, Array(error.utf8)),
            (Header.topic, Array(sourceTopic.utf8)),
            (Header.partition, Array(String(sourcePartition).utf8)),
            (Header.offset, Array(String(sourceOffset).utf8)),
        ]
    }

    /// Reads a dead letter back from a record's key, value and headers; nil if the headers are not a dead letter's.
    public init?(key: [UInt8]?, value: [UInt8], headers: [(name: String, value: [UInt8])]) {
        func header(_ name: String) -> String? {
            headers.last(where: { $0.name == name }).map { String(decoding: $0.value, as: UTF8.self) }
        }
        guard let reason = header(Header.reason), let topic = header(Header.topic),
            let partition = header(Header.partition).flatMap({ Int32($0) }),
            let offset = header(Header.offset).flatMap({ Int64($0) })
        else { return nil }
        self.init(
            original: value, key: key, reason: reason, error: header(Header.error) ?? "", sourceTopic: topic,
            sourcePartition: partition, sourceOffset: offset)
    }

    /// Builds the dead letter for a message the codec refused.
    public init(
        rejecting original: [UInt8], key: [UInt8]?, error: MessageError, topic: String, partition: Int32,
        offset: Int64
    ) {
        self.init(
            original: original, key: key, reason: error.code.rawValue, error: error.description, sourceTopic: topic,
            sourcePartition: partition, sourceOffset: offset)
    }
}
