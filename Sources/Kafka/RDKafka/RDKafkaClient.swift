import CRdKafka

/// Owns one `rd_kafka_t` and the context object its C callbacks reach through the opaque pointer; every call on
/// the handle goes through a method here (consumer calls in RDKafkaClient+Consumer.swift, producer calls in
/// RDKafkaClient+Producer.swift).
///
/// `@unchecked Sendable` because librdkafka documents its handle as thread-safe for every call this
/// layer makes (produce, poll, commit, assign, pause, flush); the pointer itself is never mutated
/// after init and never leaves this class except inside `withHandle`.
final class RDKafkaClient: @unchecked Sendable {
    enum Kind {
        case producer
        case consumer
    }

    private let handle: OpaquePointer
    /// Set for a consumer that must not run `rd_kafka_consumer_close` on destroy (after a fatal error).
    let destroyWithoutConsumerClose = StopFlag()
    /// Kept alive for as long as the handle, because callbacks reach it via `Unmanaged.passUnretained`.
    private let callbackContext: RDKafkaCallbackContext

    /// Builds the configuration (ownership: `rd_kafka_conf_new` hands us the conf; `rd_kafka_new` takes
    /// it over on success, on failure we destroy it) and creates the client with the callbacks of its kind:
    /// error and log for both, delivery reports for a producer, rebalance and commit results for a consumer.
    init(kind: Kind, properties: [String: String], callbackContext: RDKafkaCallbackContext) throws(KafkaError) {
        let conf = try RDKafkaConfiguration.make(properties)
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(callbackContext).toOpaque())
        RDKafkaCallbackContext.installCallbacks(on: conf, kind: kind)
        var errorText = [CChar](repeating: 0, count: 512)
        let type = kind == .producer ? RD_KAFKA_PRODUCER : RD_KAFKA_CONSUMER
        guard let handle = rd_kafka_new(type, conf, &errorText, errorText.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError.configuration(
                "rd_kafka_new failed: " + String(decoding: errorText.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self))
        }
        self.handle = handle
        self.callbackContext = callbackContext
    }

    /// Gives the raw handle to `body`. Do not escape the pointer.
    func withHandle<T, E: Error>(_ body: (OpaquePointer) throws(E) -> T) throws(E) -> T {
        try body(handle)
    }

    /// Whether librdkafka reported every broker down.
    var brokerState: KafkaBrokerState { callbackContext.brokers }

    /// The client's fatal error, if librdkafka raised one.
    var fatalError: KafkaError? { KafkaError.fatalError(of: handle) }

    /// Raises a fatal error in librdkafka (`rd_kafka_test_fatal_error`), for tests of the fatal path.
    func raiseFatalErrorForTesting(_ code: KafkaError.Code, reason: String) {
        _ = rd_kafka_test_fatal_error(handle, code.rdKafkaValue, reason)
    }

    /// Serves callbacks and delivery reports for up to `timeoutMilliseconds` (`rd_kafka_poll`).
    func poll(timeoutMilliseconds: Int32) {
        _ = rd_kafka_poll(handle, timeoutMilliseconds)
    }

    /// Asks the partition's leader for its watermarks (`rd_kafka_query_watermark_offsets`); blocks for up to
    /// `timeoutMilliseconds`.
    func queryWatermarks(
        topic: String, partition: Int32, timeoutMilliseconds: Int32
    ) -> Result<KafkaWatermarks, KafkaError> {
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_query_watermark_offsets(handle, topic, partition, &low, &high, timeoutMilliseconds)
        if let error = KafkaError.check(err, context: "watermarks of \(topic)[\(partition)]") { return .failure(error) }
        return .success(KafkaWatermarks(low: low, high: high))
    }

    /// Asks the cluster for metadata (`rd_kafka_metadata`, blocking); true when a broker answered in time, whatever
    /// it said of `topic`. Without a topic it asks for the topics this client knows, often none.
    func probeMetadata(topic: String? = nil, timeoutMilliseconds: Int32) -> Bool {
        // Ownership: `rd_kafka_topic_new` gives us a reference, released below.
        let rkt = topic.flatMap { rd_kafka_topic_new(handle, $0, nil) }
        defer { if let rkt { rd_kafka_topic_destroy(rkt) } }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 0, rkt, &metadata, timeoutMilliseconds)
        // Ownership: a successful call hands us the metadata; destroyed here.
        if let metadata { rd_kafka_metadata_destroy(metadata) }
        return err == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Looks up the partitions and leaders of `topic` (`rd_kafka_metadata` for that topic, blocking); the
    /// client keeps what it learned for later sends.
    func lookUpTopic(_ topic: String, timeoutMilliseconds: Int32) -> KafkaError? {
        // Ownership: `rd_kafka_topic_new` gives us a reference, released below; the client keeps the
        // topic and the leaders learned here for later sends.
        guard let rkt = rd_kafka_topic_new(handle, topic, nil) else {
            return KafkaError(rd_kafka_last_error(), context: "topic \(topic)")
        }
        defer { rd_kafka_topic_destroy(rkt) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 0, rkt, &metadata, timeoutMilliseconds)
        // Ownership: a successful call hands us the metadata; destroyed here.
        defer { if let metadata { rd_kafka_metadata_destroy(metadata) } }
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(err, context: "metadata of \(topic)") }
        guard let metadata, metadata.pointee.topic_cnt > 0, let first = metadata.pointee.topics else {
            return KafkaError(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, context: "metadata of \(topic)")
        }
        return KafkaError.check(first.pointee.err, context: "metadata of \(topic)")
    }

    /// Ownership: this class created the handle and is its only owner; `rd_kafka_destroy` frees it
    /// (and, for a consumer not closed yet, closes it first).
    deinit {
        if destroyWithoutConsumerClose.isSet {
            rd_kafka_destroy_flags(handle, Int32(RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE))
        } else {
            rd_kafka_destroy(handle)
        }
    }
}

/// Builds `rd_kafka_conf_t` objects from string properties.
enum RDKafkaConfiguration {
    /// Returns a new conf that the caller owns (free with `rd_kafka_conf_destroy` unless handed to
    /// `rd_kafka_new`). A rejected property becomes an error naming the key.
    static func make(_ properties: [String: String]) throws(KafkaError) -> OpaquePointer {
        guard let conf = rd_kafka_conf_new() else {
            throw KafkaError.configuration("rd_kafka_conf_new returned NULL")
        }
        var errorText = [CChar](repeating: 0, count: 512)
        // Sorted so that errors are reproducible when several keys are wrong.
        for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
            let result = rd_kafka_conf_set(conf, key, value, &errorText, errorText.count)
            if result != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                let reason = String(decoding: errorText.prefix { $0 != 0 }.map(UInt8.init), as: UTF8.self)
                throw KafkaError.configuration("librdkafka property \"\(key)\" rejected: \(reason)")
            }
        }
        return conf
    }
}

/// Scoped access to `rd_kafka_topic_partition_list_t`.
enum RDKafkaTopicPartitionList {
    typealias Pointer = UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    /// librdkafka's "no offset": the partition starts where the group's commit (or `auto.offset.reset`) says.
    static let invalidOffset = Int64(RD_KAFKA_OFFSET_INVALID)

    /// Creates a list (ownership: `rd_kafka_topic_partition_list_new` gives it to us, destroyed when
    /// `body` returns) with the given entries and passes it to `body`. Do not escape the pointer.
    static func with<T, E: Error>(
        _ entries: [KafkaCommitOffset], _ body: (Pointer) throws(E) -> T
    ) throws(E) -> T {
        let list = rd_kafka_topic_partition_list_new(Int32(clamping: max(entries.count, 1)))!
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for entry in entries {
            let element = rd_kafka_topic_partition_list_add(
                list, entry.topicPartition.topic, entry.topicPartition.partition)
            element?.pointee.offset = entry.offset
        }
        return try body(list)
    }

    static func with<T, E: Error>(
        _ partitions: [KafkaTopicPartition], _ body: (Pointer) throws(E) -> T
    ) throws(E) -> T {
        try with(partitions.map { KafkaCommitOffset(topicPartition: $0, offset: invalidOffset) }, body)
    }

    /// Copies a list that librdkafka owns into Swift values.
    static func read(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>?) -> [KafkaCommitOffset] {
        readWithErrors(list).map(\.entry)
    }

    /// Copies a list with each element's error (nil for none).
    static func readWithErrors(
        _ list: UnsafePointer<rd_kafka_topic_partition_list_t>?
    ) -> [(entry: KafkaCommitOffset, error: KafkaError?)] {
        guard let list, let elements = list.pointee.elems else { return [] }
        return (0..<Int(list.pointee.cnt)).map { index in
            let element = elements[index]
            let entry = KafkaCommitOffset(
                topic: String(cString: element.topic), partition: element.partition, offset: element.offset)
            return (entry, KafkaError.check(element.err, context: "\(entry.topicPartition)"))
        }
    }

    /// The first per-partition error in a list, if any.
    static func firstError(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> KafkaError? {
        guard let elements = list.pointee.elems else { return nil }
        for index in 0..<Int(list.pointee.cnt) where elements[index].err != RD_KAFKA_RESP_ERR_NO_ERROR {
            let element = elements[index]
            return KafkaError(element.err, context: "\(String(cString: element.topic))[\(element.partition)]")
        }
        return nil
    }
}

extension Duration {
    /// Whole milliseconds for librdkafka's `int timeout_ms` arguments, clamped to `Int32`.
    var rdKafkaMilliseconds: Int32 {
        Int32(clamping: components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000)
    }
}
