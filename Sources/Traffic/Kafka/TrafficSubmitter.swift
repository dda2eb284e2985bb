import Kafka
import Messages

/// Produces harness traffic to `receipt-jobs` and awaits each message's delivery report with an offset: the one job
/// submitter of the demo, the benchmarks and the chaos harness. What differs between them (pacing, stamps, the chaos
/// harness's flow-control window and per-account chains) is its options and the `prepare` each run passes.
public struct TrafficSubmitter: Sendable {
    /// How a run spreads its sends over tasks.
    public struct Spread: Sendable {
        /// Lanes that prepare and send chunks side by side; lane `n` takes every `lanes`-th chunk from chunk `n`.
        public var lanes: Int
        /// Chains per task group. A group finds a finished child by walking its list of children, so one group of
        /// 20 000 sends spent most of a process's CPU on that walk (perf, `bench pipeline` (b)).
        public var chunk: Int
        /// Sends in all of a message whose delivery stays unproven (each a `sendConfirmed`, itself resending); a
        /// frontend sends again after `deliveryUnproven`, a bounded number of times.
        public var attempts: Int

        public init(lanes: Int, chunk: Int, attempts: Int) {
            self.lanes = max(1, lanes)
            self.chunk = max(1, chunk)
            self.attempts = max(1, attempts)
        }

        /// Eight lanes of 250 sends, each sent once: the demo's and the benchmarks' burst, where one chunk's delivery
        /// reports are awaited while others are sent.
        public static let burst = Spread(lanes: 8, chunk: 250, attempts: 1)
        /// One lane and one group, every send repeated until proven (up to 10 times): the chaos harness, whose
        /// `prepare` waits for room in its flow-control window message after message.
        public static let windowed = Spread(lanes: 1, chunk: .max, attempts: 10)
    }

    public let producer: KafkaProducer
    public let topic: String
    public let spread: Spread

    public init(producer: KafkaProducer, topic: String = Topics.jobs, spread: Spread) {
        self.producer = producer
        self.topic = topic
        self.spread = spread
    }

    /// Sends every chain and waits for every delivery report. The messages of one chain (message indices, in order)
    /// go one after the other, each after the previous one's report: a frontend that keeps one account's jobs in
    /// order must, or a send that is repeated would land behind its successor. Chains go concurrently.
    ///
    /// - Parameters:
    ///   - prepare: awaited for each message, in chain order within a lane, before its chain's sends start: it waits
    ///     for room or for its time, stamps and counts the message, and returns its key and value.
    ///   - delivered: called with each message's index and delivery report.
    public func submit(
        chains: [[Int]], prepare: @escaping @Sendable (Int) async throws -> (key: [UInt8], value: [UInt8]),
        delivered: @escaping @Sendable (Int, KafkaDeliveryReport) -> Void = { _, _ in }
    ) async throws {
        let spread = self.spread
        let chunkStarts = Array(stride(from: 0, to: chains.count, by: spread.chunk))
        try await withThrowingDiscardingTaskGroup { lanes in
            for lane in 0..<min(spread.lanes, max(chunkStarts.count, 1)) {
                lanes.addTask {
                    for (number, chunkStart) in chunkStarts.enumerated() where number % spread.lanes == lane {
                        try await withThrowingDiscardingTaskGroup { group in
                            let end = chunkStart + min(spread.chunk, chains.count - chunkStart)
                            for chain in chains[chunkStart..<end] {
                                var records: [(index: Int, record: KafkaProducerRecord)] = []
                                for index in chain {
                                    let message = try await prepare(index)
                                    records.append(
                                        (
                                            index,
                                            KafkaProducerRecord(topic: topic, key: message.key, value: message.value)
                                        ))
                                }
                                group.addTask {
                                    for (index, record) in records { delivered(index, try await send(record)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Sends one record until a delivery report with an offset: `sendConfirmed` throws `deliveryUnproven`
    /// (retryable) after acknowledgements without one, and the harness, like a frontend, sends again (up to the
    /// spread's attempts, backing off).
    public func send(_ record: KafkaProducerRecord) async throws -> KafkaDeliveryReport {
        var attempt = 1
        while true {
            do {
                return try await producer.sendConfirmed(record)
            } catch let error as KafkaError where error.isRetryable && attempt < spread.attempts {
                attempt += 1
                try await Task.sleep(for: .milliseconds(100 * attempt))
            }
        }
    }
}
