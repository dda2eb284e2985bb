import CRdKafka

/// Owns librdkafka's mock cluster and the `rd_kafka_t` it is attached to; every mock-cluster call.
///
/// `@unchecked Sendable`: the mock API posts every operation to the cluster's own thread and is
/// documented thread-safe; the pointers are never mutated after init and never leave this class.
final class RDKafkaMockCluster: @unchecked Sendable {
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

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(handle)
    }

    /// Comma-separated `host:port` of every mock broker.
    var bootstrapServers: String { String(cString: rd_kafka_mock_cluster_bootstraps(cluster)) }

    func createTopic(_ name: String, partitions: Int32, replicationFactor: Int32) -> KafkaError? {
        KafkaError.check(
            rd_kafka_mock_topic_create(cluster, name, partitions, replicationFactor), context: "create topic \(name)")
    }

    func setBrokerDown(_ id: Int32) -> KafkaError? {
        KafkaError.check(rd_kafka_mock_broker_set_down(cluster, id), context: "broker \(id) down")
    }

    func setBrokerUp(_ id: Int32) -> KafkaError? {
        KafkaError.check(rd_kafka_mock_broker_set_up(cluster, id), context: "broker \(id) up")
    }

    func pushRequestErrors(_ apiKey: Int16, _ errors: [KafkaError.Code]) {
        let codes = errors.map(\.rdKafkaValue)
        codes.withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster, apiKey, $0.count, $0.baseAddress)
        }
    }

    func pushBrokerRequestError(
        broker: Int32, _ apiKey: Int16, _ error: KafkaError.Code, responseDelay: Duration
    ) -> KafkaError? {
        KafkaError.check(
            crdkafka_mock_broker_push_request_error_rtt(
                cluster, broker, apiKey, error.rdKafkaValue, responseDelay.rdKafkaMilliseconds),
            context: "push an error to broker \(broker)")
    }

    func pendingRequestErrors(broker: Int32, _ apiKey: Int16) -> Result<Int, KafkaError> {
        var count = 0
        if let error = KafkaError.check(
            rd_kafka_mock_broker_error_stack_cnt(cluster, broker, apiKey, &count),
            context: "errors pushed to broker \(broker)")
        {
            return .failure(error)
        }
        return .success(count)
    }

    func clearRequestErrors(_ apiKey: Int16) {
        rd_kafka_mock_clear_request_errors(cluster, apiKey)
    }
}
