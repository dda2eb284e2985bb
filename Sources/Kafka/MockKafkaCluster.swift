import CRdKafka

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

    private let cluster: MockClusterPointer
    /// Broker ids run from 1 to `brokerCount`.
    public let brokerCount: Int
    /// Comma-separated `host:port` of every mock broker.
    public let bootstrapServers: String

    /// Starts `brokers` mock brokers listening on ephemeral ports of 127.0.0.1.
    public init(brokers: Int = 3) throws(KafkaError) {
        guard brokers > 0 else { throw KafkaError.configuration("a mock cluster needs at least one broker") }
        self.cluster = try MockClusterPointer(brokers: brokers)
        self.brokerCount = brokers
        self.bootstrapServers = cluster.withCluster { String(cString: rd_kafka_mock_cluster_bootstraps($0)) }
    }

    /// Creates a topic with `partitions` partitions, each led by one of the brokers in turn.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        guard partitions > 0 else { throw KafkaError.configuration("topic \(name): partitions must be positive") }
        let err = cluster.withCluster {
            rd_kafka_mock_topic_create($0, name, Int32(clamping: partitions), Int32(clamping: replicationFactor))
        }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err, context: "create topic \(name)") }
    }

    /// Disconnects broker `id` (or all with -1) and refuses new connections; leaders do not move.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        let err = cluster.withCluster { rd_kafka_mock_broker_set_down($0, id) }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err, context: "broker \(id) down") }
    }

    /// Lets broker `id` (or all with -1) accept connections again.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        let err = cluster.withCluster { rd_kafka_mock_broker_set_up($0, id) }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err, context: "broker \(id) up") }
    }

    /// Makes the next `errors.count` requests of type `apiKey` (to any broker) fail with these
    /// codes, in order (`KafkaError.Code.transport` disconnects the client instead).
    public func pushRequestErrors(_ apiKey: APIKey, _ errors: [KafkaError.Code]) {
        let codes = errors.map(\.rdKafkaValue)
        cluster.withCluster { mock in
            codes.withUnsafeBufferPointer {
                rd_kafka_mock_push_request_errors_array(mock, apiKey.rawValue, $0.count, $0.baseAddress)
            }
        }
    }

    /// Makes the next request of type `apiKey` that broker `broker` receives fail with `error`, answered only after
    /// `responseDelay` (the request is not carried out). Requests after it are served as usual meanwhile, so one
    /// produce request can be held back while later ones of the same partition succeed.
    public func pushBrokerRequestError(
        broker: Int32, _ apiKey: APIKey, _ error: KafkaError.Code, responseDelay: Duration = .zero
    ) throws(KafkaError) {
        let milliseconds = Int32(
            clamping: responseDelay.components.seconds * 1000
                + responseDelay.components.attoseconds / 1_000_000_000_000_000)
        let err = cluster.withCluster {
            crdkafka_mock_broker_push_request_error_rtt($0, broker, apiKey.rawValue, error.rdKafkaValue, milliseconds)
        }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err, context: "push an error to broker \(broker)") }
    }

    /// How many errors pushed with ``pushBrokerRequestError(broker:_:_:responseDelay:)`` broker `broker` still holds
    /// for `apiKey`: 0 once the requests they were meant for have arrived.
    public func pendingRequestErrors(broker: Int32, _ apiKey: APIKey) throws(KafkaError) -> Int {
        var count = 0
        let err = cluster.withCluster { rd_kafka_mock_broker_error_stack_cnt($0, broker, apiKey.rawValue, &count) }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(err, context: "errors pushed to broker \(broker)") }
        return count
    }

    /// Forgets errors still pushed for `apiKey`.
    public func clearRequestErrors(_ apiKey: APIKey) {
        cluster.withCluster { rd_kafka_mock_clear_request_errors($0, apiKey.rawValue) }
    }
}

/// Owns the mock cluster and the `rd_kafka_t` it is attached to.
///
/// `@unchecked Sendable`: the mock API posts every operation to the cluster's own thread and is
/// documented thread-safe; the pointers are never mutated after init and never leave `withCluster`.
private final class MockClusterPointer: @unchecked Sendable {
    private let handle: OpaquePointer
    private let cluster: OpaquePointer

    init(brokers: Int) throws(KafkaError) {
        // Ownership: the conf goes to rd_kafka_new on success (destroyed here on failure); the
        // handle is ours and outlives the cluster (destroyed after it in deinit).
        let conf = try RDKafkaConfiguration.make(["log_level": "3"])
        var errorText = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError.configuration("rd_kafka_new for the mock cluster failed")
        }
        // Ownership: rd_kafka_mock_cluster_new gives us the cluster; rd_kafka_mock_cluster_destroy frees it.
        guard let cluster = rd_kafka_mock_cluster_new(handle, Int32(clamping: brokers)) else {
            rd_kafka_destroy(handle)
            throw KafkaError(code: .state, message: "rd_kafka_mock_cluster_new failed", isRetryable: false)
        }
        self.handle = handle
        self.cluster = cluster
    }

    /// Gives the cluster pointer to `body`. Do not escape the pointer.
    func withCluster<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try body(cluster)
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(handle)
    }
}
