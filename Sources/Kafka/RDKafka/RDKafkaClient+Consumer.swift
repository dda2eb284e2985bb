import CRdKafka
import Logging

/// The consumer's calls on its handle.
extension RDKafkaClient {
    /// Serves the main queue (errors, logs, commit results) from `rd_kafka_consumer_poll` too.
    func redirectMainQueueToConsumer() -> KafkaError? {
        withHandle { KafkaError.check(rd_kafka_poll_set_consumer($0), context: "rd_kafka_poll_set_consumer") }
    }

    /// Joins the group for these topics (`rd_kafka_subscribe`, replacing an earlier subscription).
    func subscribe(topics: [String]) -> KafkaError? {
        let list = topics.map { KafkaTopicPartition(topic: $0, partition: RD_KAFKA_PARTITION_UA) }
        let err = RDKafkaTopicPartitionList.with(list) { list in withHandle { rd_kafka_subscribe($0, list) } }
        return KafkaError.check(err, context: "subscribe to \(topics.joined(separator: ","))")
    }

    /// Commits `offsets` and blocks until the coordinator answered (`rd_kafka_commit`, synchronous).
    func commit(_ offsets: [KafkaCommitOffset]) -> KafkaError? {
        RDKafkaTopicPartitionList.with(offsets) { list -> KafkaError? in
            if let error = withHandle({ KafkaError.check(rd_kafka_commit($0, list, 0), context: "commit") }) {
                return error
            }
            return RDKafkaTopicPartitionList.firstError(list)
        }
    }

    /// Starts a commit of `offsets` and returns at once; the offset commit callback logs a failure.
    func commitAsync(_ offsets: [KafkaCommitOffset]) -> KafkaError? {
        let err = RDKafkaTopicPartitionList.with(offsets) { list in withHandle { rd_kafka_commit($0, list, 1) } }
        return KafkaError.check(err, context: "commitAsync")
    }

    /// The group's committed offsets (`rd_kafka_committed`, blocking; negative where nothing was committed).
    func committed(
        _ partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32
    ) -> Result<[KafkaCommitOffset], KafkaError> {
        let lookup = withHandle { RDKafkaCommittedLookup.ask($0, partitions, timeoutMilliseconds: timeoutMilliseconds) }
        if let failure = lookup.firstFailure { return .failure(failure) }
        return .success(lookup.entries.map(\.entry))
    }

    /// Stops (`pause: true`) or restarts fetching these partitions.
    func setPaused(_ partitions: [KafkaTopicPartition], pause: Bool) -> KafkaError? {
        RDKafkaTopicPartitionList.with(partitions) { list -> KafkaError? in
            let err = withHandle {
                pause ? rd_kafka_pause_partitions($0, list) : rd_kafka_resume_partitions($0, list)
            }
            if let error = KafkaError.check(err, context: pause ? "pause" : "resume") { return error }
            return RDKafkaTopicPartitionList.firstError(list)
        }
    }

    /// Moves the fetch position of one partition (`rd_kafka_seek_partitions`). With a timeout the call returns once
    /// the fetcher has moved: nothing fetched from the old position reaches `rd_kafka_consumer_poll` after it.
    func seek(_ request: KafkaCommitOffset, timeoutMilliseconds: Int) -> KafkaError? {
        // In the unit the linked librdkafka reads (see `RDKafkaVersion`).
        let timeout = RDKafkaVersion.seekTimeoutArgument(milliseconds: timeoutMilliseconds)
        return RDKafkaTopicPartitionList.with([request]) { list -> KafkaError? in
            if let error = withHandle({ rd_kafka_seek_partitions($0, list, timeout) }) {
                return KafkaError(consuming: error, context: "seek \(request)")
            }
            return RDKafkaTopicPartitionList.firstError(list)
        }
    }

    /// For each partition, its position (`rd_kafka_position`: the next offset the application gets, negative before
    /// anything was read) and the high watermark the last fetch reported (`rd_kafka_get_watermark_offsets`, local:
    /// -1 before any fetch answered); nil for a partition librdkafka does not know. nil when the positions could
    /// not be read.
    func fetchPositions(_ partitions: [KafkaTopicPartition]) -> [RDKafkaFetchPosition?]? {
        withHandle { handle in
            RDKafkaTopicPartitionList.with(partitions) { list -> [RDKafkaFetchPosition?]? in
                guard rd_kafka_position(handle, list) == RD_KAFKA_RESP_ERR_NO_ERROR, let elements = list.pointee.elems
                else { return nil }
                return (0..<Int(list.pointee.cnt)).map { index -> RDKafkaFetchPosition? in
                    var low: Int64 = -1
                    var high: Int64 = -1
                    let err = rd_kafka_get_watermark_offsets(
                        handle, elements[index].topic, elements[index].partition, &low, &high)
                    guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
                    return RDKafkaFetchPosition(position: elements[index].offset, highWatermark: high)
                }
            }
        }
    }

    /// Polls the consumer queue for up to `timeoutMilliseconds` (`rd_kafka_consumer_poll`; rebalance and commit
    /// callbacks run inside it). nil when nothing arrived.
    func consumerPoll(timeoutMilliseconds: Int32, logger: Logger) -> RDKafkaPolledMessage? {
        guard let message = withHandle({ rd_kafka_consumer_poll($0, timeoutMilliseconds) }) else { return nil }
        // Ownership: rd_kafka_consumer_poll hands us the message; copied, then destroyed here.
        defer { rd_kafka_message_destroy(message) }
        return RDKafkaPolledMessage(message, fatalError: { self.fatalError }, logger: logger)
    }

    /// Leaves the group (`rd_kafka_consumer_close`): revokes through the rebalance callback, on this thread.
    func closeConsumer() -> KafkaError? {
        withHandle { KafkaError.check(rd_kafka_consumer_close($0)) }
    }
}

/// Where a fetcher stands on one partition (see ``RDKafkaClient/fetchPositions(_:)``).
struct RDKafkaFetchPosition: Hashable, Sendable {
    var position: Int64
    var highWatermark: Int64
}

/// The consumer's handle as the rebalance callback sees it, valid only during that callback: the calls a
/// rebalance makes. Do not escape it.
struct RDKafkaRebalanceHandle {
    let rk: OpaquePointer

    /// One ask for the group's committed offsets (`rd_kafka_committed`, blocking up to `timeoutMilliseconds`).
    func committed(_ partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) -> RDKafkaCommittedLookup {
        RDKafkaCommittedLookup.ask(rk, partitions, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Assigns these partitions (`rd_kafka_assign`), each starting at its offset in `starts` (absent: where
    /// librdkafka finds the committed offset or `auto.offset.reset` puts it).
    func assign(_ partitions: [KafkaTopicPartition], startingAt starts: [KafkaTopicPartition: Int64]) -> KafkaError? {
        let entries = partitions.map {
            KafkaCommitOffset(topicPartition: $0, offset: starts[$0] ?? RDKafkaTopicPartitionList.invalidOffset)
        }
        return RDKafkaTopicPartitionList.with(entries) { KafkaError.check(rd_kafka_assign(rk, $0), context: "assign") }
    }

    /// Resumes these partitions (`rd_kafka_resume_partitions`); the answer is not needed.
    func resume(_ partitions: [KafkaTopicPartition]) {
        RDKafkaTopicPartitionList.with(partitions) { _ = rd_kafka_resume_partitions(rk, $0) }
    }

    /// Clears the assignment (`rd_kafka_assign(NULL)`).
    func unassign() -> KafkaError? {
        KafkaError.check(rd_kafka_assign(rk, nil), context: "assign")
    }
}

/// One answer of `rd_kafka_committed`: the call's own failure, and each partition's offset (negative: nothing
/// committed) with its own error.
struct RDKafkaCommittedLookup {
    var failure: KafkaError?
    var entries: [(entry: KafkaCommitOffset, error: KafkaError?)]

    /// The first failure: the call's, or else the first partition's.
    var firstFailure: KafkaError? { failure ?? entries.lazy.compactMap(\.error).first }

    static func ask(
        _ handle: OpaquePointer, _ partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32
    ) -> RDKafkaCommittedLookup {
        RDKafkaTopicPartitionList.with(partitions) { list in
            let err = rd_kafka_committed(handle, list, timeoutMilliseconds)
            return RDKafkaCommittedLookup(
                failure: KafkaError.check(err, context: "committed"),
                entries: RDKafkaTopicPartitionList.readWithErrors(list))
        }
    }
}
