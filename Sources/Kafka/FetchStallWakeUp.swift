import Synchronization

/// Wakes a fetcher that librdkafka 2.0.2 left idle while messages wait on the broker.
///
/// librdkafka 2.0.2 stops fetching once the consumer's prefetch queue holds `queued.max.messages.kbytes` (or
/// `queued.min.messages`), with no back-off time: the partition's broker thread decides again only when something
/// wakes it (an operation for it, a response) or when its serve timeout, a fixed second, ends
/// (`rd_kafka_toppar_fetch_decide`; `fetch.error.backoff.ms` applies to fetch errors only; librdkafka 2.2 added
/// `fetch.queue.backoff.ms` for this, librdkafka issue #2879). With a backlog a worker drains the queue in a fraction
/// of that second and waits out the rest (`bench pipeline` (b) drain: 18,500 jobs/s without this, ~50,000 with it).
///
/// When a poll finds the queue empty while a partition being fetched may have messages on the broker past the
/// position, the poll thread asks that partition's leader for its watermarks: the request is an operation for the
/// leader's broker thread, which then decides again and fetches. "May have": the high watermark the last fetch
/// reported (`rd_kafka_get_watermark_offsets`, local) is above the position (or, before anything was read, above
/// the committed offset the assignment started from), or no fetch answered for the partition yet. A wake-up that
/// brings no message doubles the wait before the next one, up to librdkafka's own second, so an idle consumer whose
/// watermarks mislead sends at most one small request a second. Runs on the consumer's poll thread only.
struct FetchStallWakeUp {
    /// `rd_kafka_consumer_poll`'s timeout: how long an empty queue may go unnoticed.
    static let pollTimeoutMilliseconds: Int32 = 20
    /// The shortest wait between two wake-ups.
    var minimumInterval: Duration = .milliseconds(50)
    /// The longest: librdkafka decides again on its own after a second.
    var maximumInterval: Duration = .seconds(1)
    /// How long the poll thread waits for the answer (the wake-up is the request; the answer is not used).
    var requestTimeoutMilliseconds: Int32 = 200

    private var interval: Duration = .milliseconds(50)
    private var notBefore: ContinuousClock.Instant?
    private var messageSinceWakeUp = true
    private var rotation = 0

    /// Called for every message polled.
    mutating func messageArrived() {
        messageSinceWakeUp = true
    }

    /// Called after a poll that returned nothing; `fetching` are the assigned partitions not paused, with the
    /// committed offsets they started from (-1: none). Returns whether a wake-up was sent.
    mutating func pollWasEmpty(client: RDKafkaClient, fetching: [KafkaCommitOffset]) -> Bool {
        guard !fetching.isEmpty else { return false }
        let now = ContinuousClock.now
        if let notBefore, now < notBefore { return false }
        let behind = Self.partitionsBehind(fetching, positions: client.fetchPositions(fetching.map(\.topicPartition)))
        guard !behind.isEmpty else {
            interval = minimumInterval
            return false
        }
        interval = messageSinceWakeUp ? minimumInterval : min(interval * 2, maximumInterval)
        messageSinceWakeUp = false
        // In turn: with several brokers, each stalled one has a partition behind, and each is woken in a few rounds.
        rotation &+= 1
        let partition = behind[rotation % behind.count]
        let answer = client.queryWatermarks(
            topic: partition.topic, partition: partition.partition, timeoutMilliseconds: requestTimeoutMilliseconds)
        let answered = if case .success = answer { true } else { false }
        notBefore = now.advanced(by: answered ? interval : maximumInterval)
        return true
    }

    /// The partitions that may have messages on the broker not fetched yet: the high watermark the last fetch
    /// reported is above the position (the next offset the application gets; before anything was read, the
    /// committed offset the assignment started from, or 0), or no fetch reported one yet while the broker answered
    /// for another partition (a fetch holds a few partitions when the others' backlog is large). With no watermark
    /// known at all (a broker down since the assignment, say) nothing is behind: there is no fetcher to wake.
    /// `positions` are what ``RDKafkaClient/fetchPositions(_:)`` read for `partitions` (in the same order; nil when
    /// the positions could not be read, nothing is behind then).
    static func partitionsBehind(
        _ partitions: [KafkaCommitOffset], positions: [RDKafkaFetchPosition?]?
    ) -> [KafkaTopicPartition] {
        guard let positions, positions.count == partitions.count else { return [] }
        var behind: [KafkaTopicPartition] = []
        var unanswered: [KafkaTopicPartition] = []
        for (partition, fetch) in zip(partitions, positions) {
            guard let fetch else { continue }
            let position = fetch.position >= 0 ? fetch.position : max(0, partition.offset)
            if fetch.highWatermark < 0 {
                unanswered.append(partition.topicPartition)
            } else if fetch.highWatermark > position {
                behind.append(partition.topicPartition)
            }
        }
        let answered = unanswered.count < partitions.count
        return answered ? behind + unanswered : []
    }
}

/// A count one client thread adds to and any thread reads (fetch wake-ups, implicit-acknowledgement resends).
final class KafkaEventCount: Sendable {
    let value = Atomic<Int>(0)
}
