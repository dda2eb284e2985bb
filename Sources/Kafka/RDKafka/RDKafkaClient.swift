import CRdKafka

/// Owns one `rd_kafka_t` and the context object its C callbacks reach through the opaque pointer.
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
    private let callbackContext: AnyObject?

    /// Builds the configuration (ownership: `rd_kafka_conf_new` hands us the conf; `rd_kafka_new` takes
    /// it over on success, on failure we destroy it) and creates the client.
    init(
        kind: Kind, properties: [String: String], callbackContext: AnyObject?,
        configure: (OpaquePointer) -> Void = { _ in }
    ) throws(KafkaError) {
        let conf = try RDKafkaConfiguration.make(properties)
        if let callbackContext {
            rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(callbackContext).toOpaque())
        }
        configure(conf)
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

    /// Whether librdkafka reported every broker down (nil for a client without the common callbacks).
    var brokerState: KafkaBrokerState? { (callbackContext as? RDKafkaCallbackContext)?.brokers }

    /// The client's fatal error, if librdkafka raised one.
    var fatalError: KafkaError? { KafkaError.fatalError(of: handle) }

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
        try with(partitions.map { KafkaCommitOffset(topicPartition: $0, offset: Int64(RD_KAFKA_OFFSET_INVALID)) }, body)
    }

    /// Copies a list that librdkafka owns into Swift values.
    static func read(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>?) -> [KafkaCommitOffset] {
        guard let list, let elements = list.pointee.elems else { return [] }
        return (0..<Int(list.pointee.cnt)).map { index in
            let element = elements[index]
            return KafkaCommitOffset(
                topic: String(cString: element.topic), partition: element.partition, offset: element.offset)
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
