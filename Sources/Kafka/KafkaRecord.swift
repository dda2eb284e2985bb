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
