/// librdkafka's in-process mock Kafka cluster, for tests, benchmarks and `verify-worker dev-broker`.
///
/// Any Kafka client (this package's, kcat, confluent-kafka) can connect to `bootstrapServers`
/// while the value lives. It supports produce, consume, consumer groups, offset commits and
/// idempotent producers; topics must be created with `createTopic` (or are auto-created with
/// the default partition count on first use).
///
/// Limits worth knowing: each partition keeps only about 5 MB (older batches are deleted, so a
/// consumer starting at 0 silently skips them); leaders do not move when a broker is set down.
public final class MockKafkaCluster: Sendable {
    /// Kafka protocol request types (`ApiKey`) for error injection.
    public struct APIKey: Hashable, Sendable, RawRepresentable {
        public var rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let produce = APIKey(rawValue: 0)
        public static let fetch = APIKey(rawValue: 1)
        public static let listOffsets = APIKey(rawValue: 2)
        public static let metadata = APIKey(rawValue: 3)
        public static let offsetCommit = APIKey(rawValue: 8)
        public static let offsetFetch = APIKey(rawValue: 9)
        public static let findCoordinator = APIKey(rawValue: 10)
        public static let joinGroup = APIKey(rawValue: 11)
        public static let heartbeat = APIKey(rawValue: 12)
        public static let syncGroup = APIKey(rawValue: 14)
        public static let initProducerID = APIKey(rawValue: 22)
    }

    private let cluster: RDKafkaMockCluster
    /// Broker ids run from 1 to `brokerCount`.
    public let brokerCount: Int
    /// Comma-separated `host:port` of every mock broker.
    public let bootstrapServers: String

    /// Starts `brokers` mock brokers listening on ephemeral ports of 127.0.0.1.
    public init(brokers: Int = 3) throws(KafkaError) {
        guard brokers > 0 else { throw KafkaError.configuration("a mock cluster needs at least one broker") }
        self.cluster = try RDKafkaMockCluster(brokers: brokers)
        self.brokerCount = brokers
        self.bootstrapServers = cluster.bootstrapServers
    }

    /// Creates a topic with `partitions` partitions, each led by one of the brokers in turn.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        guard partitions > 0 else { throw KafkaError.configuration("topic \(name): partitions must be positive") }
        let failure = cluster.createTopic(
            name, partitions: Int32(clamping: partitions), replicationFactor: Int32(clamping: replicationFactor))
        if let failure { throw failure }
    }

    /// Disconnects broker `id` (or all with -1) and refuses new connections; leaders do not move.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        if let failure = cluster.setBrokerDown(id) { throw failure }
    }

    /// Lets broker `id` (or all with -1) accept connections again.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        if let failure = cluster.setBrokerUp(id) { throw failure }
    }

    /// Makes the next `errors.count` requests of type `apiKey` (to any broker) fail with these
    /// codes, in order (`KafkaError.Code.transport` disconnects the client instead).
    public func pushRequestErrors(_ apiKey: APIKey, _ errors: [KafkaError.Code]) {
        cluster.pushRequestErrors(apiKey.rawValue, errors)
    }

    /// Makes the next request of type `apiKey` that broker `broker` receives fail with `error`, answered only after
    /// `responseDelay` (the request is not carried out). Requests after it are served as usual meanwhile, so one
    /// produce request can be held back while later ones of the same partition succeed.
    public func pushBrokerRequestError(
        broker: Int32, _ apiKey: APIKey, _ error: KafkaError.Code, responseDelay: Duration = .zero
    ) throws(KafkaError) {
        let failure = cluster.pushBrokerRequestError(
            broker: broker, apiKey.rawValue, error, responseDelay: responseDelay)
        if let failure { throw failure }
    }

    /// How many errors pushed with ``pushBrokerRequestError(broker:_:_:responseDelay:)`` broker `broker` still holds
    /// for `apiKey`: 0 once the requests they were meant for have arrived.
    public func pendingRequestErrors(broker: Int32, _ apiKey: APIKey) throws(KafkaError) -> Int {
        try cluster.pendingRequestErrors(broker: broker, apiKey.rawValue).get()
    }

    /// Forgets errors still pushed for `apiKey`.
    public func clearRequestErrors(_ apiKey: APIKey) {
        cluster.clearRequestErrors(apiKey.rawValue)
    }
}
