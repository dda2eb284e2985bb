/// One partition of one topic.
public struct KafkaTopicPartition: Hashable, Sendable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }
    public var description: String { "\(topic)[\(partition)]" }
}

/// An offset to commit for one partition. Kafka's convention, kept here: the committed offset is the
/// offset of the *next* message to read, so after finishing offset 41 you commit 42.
public struct KafkaCommitOffset: Hashable, Sendable, CustomStringConvertible {
    public var topicPartition: KafkaTopicPartition
    public var offset: Int64
    public init(topicPartition: KafkaTopicPartition, offset: Int64) {
        self.topicPartition = topicPartition
        self.offset = offset
    }
    public init(topic: String, partition: Int32, offset: Int64) {
        self.init(topicPartition: KafkaTopicPartition(topic: topic, partition: partition), offset: offset)
    }
    public var description: String { "\(topicPartition)@\(offset)" }
}

/// One message header. Kafka allows repeated names and a null value.
public struct KafkaHeader: Hashable, Sendable {
    public var name: String
    public var value: [UInt8]?
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }
}

/// A message to produce. `partition == nil` lets librdkafka's partitioner pick by key
/// (`consistent_random` by default: the same key always lands on the same partition).
public struct KafkaProducerRecord: Sendable {
    public var topic: String
    public var partition: Int32?
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [KafkaHeader]
    public init(
        topic: String, partition: Int32? = nil, key: [UInt8]? = nil, value: [UInt8]?, headers: [KafkaHeader] = []
    ) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
    }
}

extension KafkaProducerRecord {
    /// librdkafka's framing of one record, the most it adds to key, value and headers when it compares a record with
    /// `message.max.bytes` (measured on 2.0.2: a value of `message.max.bytes` − 36 bytes is accepted, one more
    /// byte refused).
    public static let recordFraming = 36
    /// A record batch's header (Kafka's v2 format): a broker compares the whole batch with `max.message.bytes`.
    public static let batchFraming = 61
    /// Length fields of one header (a name length and a value length, varints of at most 5 bytes each).
    public static let headerFraming = 10

    /// At least the bytes this record takes as the only record of a batch: what librdkafka compares with
    /// `message.max.bytes` and a broker with its `max.message.bytes`. A record no larger than both limits is
    /// accepted by both (uncompressed; compression only makes it smaller).
    public var framedSize: Int {
        Self.recordFraming + Self.batchFraming + (key?.count ?? 0) + (value?.count ?? 0)
            + headers.reduce(0) { $0 + Self.headerFraming + $1.name.utf8.count + ($1.value?.count ?? 0) }
    }
}

/// Where a produced message was stored, from its delivery report.
public struct KafkaDeliveryReport: Hashable, Sendable {
    public var topicPartition: KafkaTopicPartition
    /// Where the message was stored; negative when the acknowledgement did not say (see
    /// `KafkaProducer.sendConfirmed`).
    public var offset: Int64

    /// Whether the broker's answer for this very message gave its offset.
    public var hasOffset: Bool { offset >= 0 }
}

/// A consumed message with everything the pipeline needs to track and commit it.
public struct KafkaConsumerMessage: Sendable {
    public var topicPartition: KafkaTopicPartition
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]?
    public var headers: [KafkaHeader]
    /// Milliseconds since the epoch (create or log-append time), nil when the broker gave none.
    public var timestampMilliseconds: Int64?

    public var topic: String { topicPartition.topic }
    public var partition: Int32 { topicPartition.partition }
    /// The offset to commit once this message is finished (`offset + 1`).
    public var nextOffset: KafkaCommitOffset { KafkaCommitOffset(topicPartition: topicPartition, offset: offset + 1) }
}
