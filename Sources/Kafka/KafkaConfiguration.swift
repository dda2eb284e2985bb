/// Producer settings: a few typed ones with safe defaults, and every other librdkafka property by
/// pass-through (`properties`, applied last, so it can override anything; see librdkafka's
/// CONFIGURATION.md for the keys).
public struct KafkaProducerConfiguration: Sendable {
    /// `bootstrap.servers`, comma separated `host:port`. Default: `localhost:9092`.
    public var bootstrapServers: String
    /// Messages this process may have produced but not yet seen acknowledged. `send` suspends while
    /// the bound is reached, so memory stays bounded however fast callers produce. Default: 10 000.
    public var maximumInFlightMessages: Int
    /// `linger.ms`: how long librdkafka waits to fill a batch. 5 ms trades a little latency for
    /// several times the throughput of 0 with 1 KiB messages. Default: 5.
    public var lingerMilliseconds: Int
    /// `batch.size` in bytes, the most a partition's batch may hold. Default: 1 000 000.
    public var batchSizeBytes: Int
    /// `compression.type`. Default: `none` (receipts are small and mostly base64; lz4 is an option).
    public var compression: String
    /// `message.timeout.ms`: how long librdkafka retries a message before reporting it failed.
    /// Default: 120 000.
    public var messageTimeoutMilliseconds: Int
    /// `client.id` as shown in broker logs. Default: `verify-worker`.
    public var clientID: String
    /// `message.max.bytes`: the largest record librdkafka accepts (key, value, headers and its framing; see
    /// `KafkaProducerRecord.framedSize`); a larger one fails at once with `MSG_SIZE_TOO_LARGE`, a permanent error.
    /// Keep it at most the brokers' `max.message.bytes` (Kafka's default 1,048,588). Default: 1,000,000
    /// (librdkafka's own).
    public var messageMaxBytes: Int
    /// Any librdkafka property, applied after everything above. Turning off `enable.idempotence` or
    /// lowering `acks` here gives up the no-loss, no-duplicate guarantee. Default: empty.
    public var properties: [String: String]

    public init(
        bootstrapServers: String = "localhost:9092", maximumInFlightMessages: Int = 10_000,
        lingerMilliseconds: Int = 5, batchSizeBytes: Int = 1_000_000, compression: String = "none",
        messageTimeoutMilliseconds: Int = 120_000, clientID: String = "verify-worker",
        messageMaxBytes: Int = 1_000_000, properties: [String: String] = [:]
    ) {
        self.bootstrapServers = bootstrapServers
        self.maximumInFlightMessages = maximumInFlightMessages
        self.lingerMilliseconds = lingerMilliseconds
        self.batchSizeBytes = batchSizeBytes
        self.compression = compression
        self.messageTimeoutMilliseconds = messageTimeoutMilliseconds
        self.clientID = clientID
        self.messageMaxBytes = messageMaxBytes
        self.properties = properties
    }

    /// The complete property set handed to librdkafka.
    ///
    /// Fixed defaults: `enable.idempotence=true` and `acks=all` (no loss, no duplicates, order kept per
    /// partition across retries); `queue.buffering.max.messages` at least twice the in-flight bound
    /// so librdkafka's own queue is never the one that fills first.
    public var librdkafkaProperties: [String: String] {
        var result: [String: String] = [
            "bootstrap.servers": bootstrapServers,
            "client.id": clientID,
            "enable.idempotence": "true",
            "acks": "all",
            "linger.ms": String(lingerMilliseconds),
            "batch.size": String(batchSizeBytes),
            "compression.type": compression,
            "message.timeout.ms": String(messageTimeoutMilliseconds),
            "message.max.bytes": String(messageMaxBytes),
            "queue.buffering.max.messages": String(max(100_000, maximumInFlightMessages * 2)),
        ]
        result.merge(properties) { _, override in override }
        return result
    }
}

/// Consumer-group settings: typed ones with safe defaults, and every other librdkafka property by
/// pass-through (`properties`, applied last).
public struct KafkaConsumerConfiguration: Sendable {
    /// `bootstrap.servers`. Default: `localhost:9092`.
    public var bootstrapServers: String
    /// `group.id`, required: members of one group share the partitions.
    public var groupID: String
    /// `auto.offset.reset` when the group has no committed offset: `earliest` so that no job is
    /// skipped by a new group. Default: `earliest`.
    public var autoOffsetReset: String
    /// `partition.assignment.strategy`. Only eager strategies (`range`, `roundrobin`) are accepted:
    /// the rebalance handling here is eager, and librdkafka 2.0.2's cooperative-sticky has a
    /// commit-during-rebalance bug. Default: `range`.
    public var assignmentStrategy: String
    /// `session.timeout.ms`: how long a silent member keeps its partitions. Default: 10 000.
    public var sessionTimeoutMilliseconds: Int
    /// `max.poll.interval.ms`. The poll thread stops polling only while the event buffer is full or a
    /// revoke hook runs, so this bounds how long the application may leave the stream unread.
    /// Default: 300 000.
    public var maximumPollIntervalMilliseconds: Int
    /// Events (messages and rebalance notices) buffered between the poll thread and the reader.
    /// When full the poll thread waits, so nothing is buffered without bound in Swift; pause
    /// partitions to hold back work earlier. Default: 1 024.
    public var eventBufferCapacity: Int
    /// How long the revoke hook may run before the poll thread gives the partitions back anyway.
    /// Keep it well below `maximumPollIntervalMilliseconds`. Default: 10 s.
    public var revokeDeadline: Duration
    /// `client.id`. Default: `verify-worker`.
    public var clientID: String
    /// Any librdkafka property, applied last. `enable.auto.commit` and `enable.auto.offset.store` are
    /// always false: offsets are committed only explicitly. Default: empty.
    public var properties: [String: String]

    public init(
        bootstrapServers: String = "localhost:9092", groupID: String, autoOffsetReset: String = "earliest",
        assignmentStrategy: String = "range", sessionTimeoutMilliseconds: Int = 10_000,
        maximumPollIntervalMilliseconds: Int = 300_000, eventBufferCapacity: Int = 1_024,
        revokeDeadline: Duration = .seconds(10), clientID: String = "verify-worker",
        properties: [String: String] = [:]
    ) {
        self.bootstrapServers = bootstrapServers
        self.groupID = groupID
        self.autoOffsetReset = autoOffsetReset
        self.assignmentStrategy = assignmentStrategy
        self.sessionTimeoutMilliseconds = sessionTimeoutMilliseconds
        self.maximumPollIntervalMilliseconds = maximumPollIntervalMilliseconds
        self.eventBufferCapacity = eventBufferCapacity
        self.revokeDeadline = revokeDeadline
        self.clientID = clientID
        self.properties = properties
    }

    /// The complete property set handed to librdkafka, or an error when it asks for something this
    /// consumer cannot honour (a cooperative strategy, automatic commits).
    public func librdkafkaProperties() throws(KafkaError) -> [String: String] {
        var result: [String: String] = [
            "bootstrap.servers": bootstrapServers,
            "group.id": groupID,
            "client.id": clientID,
            "auto.offset.reset": autoOffsetReset,
            "partition.assignment.strategy": assignmentStrategy,
            "session.timeout.ms": String(sessionTimeoutMilliseconds),
            "max.poll.interval.ms": String(maximumPollIntervalMilliseconds),
        ]
        result.merge(properties) { _, override in override }
        if let strategy = result["partition.assignment.strategy"], strategy.contains("cooperative") {
            throw KafkaError.configuration(
                "librdkafka property \"partition.assignment.strategy\" = \(strategy): only eager strategies "
                    + "(range, roundrobin) are supported")
        }
        for key in ["enable.auto.commit", "enable.auto.offset.store"] where result[key] == "true" {
            throw KafkaError.configuration(
                "librdkafka property \"\(key)\" must stay false: offsets are committed explicitly")
        }
        result["enable.auto.commit"] = "false"
        result["enable.auto.offset.store"] = "false"
        return result
    }
}
