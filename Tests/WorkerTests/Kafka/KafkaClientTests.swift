import Foundation
import Synchronization
import Testing

@testable import Kafka

/// The producer and the consumer group against librdkafka's in-process mock cluster.
@Suite("Kafka client against the mock cluster")
struct KafkaClientTests {
    @Test("10,000 messages produced are all consumed by a group, once each", .timeLimit(.minutes(2)))
    func producesAndConsumesTenThousand() async throws {
        let topic = "kt-bulk"
        let cluster = try KafkaTest.cluster(topics: [topic: 4])
        let producer = try KafkaTest.producer(cluster)
        let reports = try await KafkaTest.produce(producer, topic: topic, count: 10_000, prefix: "bulk")
        await producer.shutdown()
        #expect(reports.count == 10_000)
        #expect(Set(reports.map { "\($0.topicPartition)@\($0.offset)" }).count == 10_000)

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("bulk"))
        try consumer.subscribe(topics: [topic])
        let messages = try await KafkaTest.collect(consumer.events, messages: 10_000)
        await consumer.close()

        let values = Set(messages.map { KafkaTest.text($0.value) })
        #expect(values.count == 10_000)
        #expect(values == Set((0..<10_000).map { KafkaTest.text(KafkaTest.value("bulk", $0)) }))
        let sample = try #require(messages.first)
        #expect(sample.topic == topic)
        #expect(sample.headers.first?.name == "index")
        #expect(sample.timestampMilliseconds != nil)
        #expect(KafkaTest.text(sample.key).hasPrefix("k"))
    }

    @Test("a new consumer resumes exactly after the committed offsets", .timeLimit(.minutes(2)))
    func resumesAfterCommittedOffsets() async throws {
        let topic = "kt-resume"
        let cluster = try KafkaTest.cluster(topics: [topic: 2])
        let producer = try KafkaTest.producer(cluster)
        _ = try await KafkaTest.produce(producer, topic: topic, count: 100, prefix: "resume", partitions: 2)
        await producer.shutdown()
        let group = KafkaTest.uniqueGroup("resume")
        let p0 = KafkaTopicPartition(topic: topic, partition: 0)
        let p1 = KafkaTopicPartition(topic: topic, partition: 1)

        let first = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try first.subscribe(topics: [topic])
        let read = try await KafkaTest.collect(first.events, messages: 100)
        #expect(read.count == 100)
        // Pretend offsets 0..<20 of partition 0 and 0..<30 of partition 1 are finished.
        try await first.commit([
            KafkaCommitOffset(topicPartition: p0, offset: 20), KafkaCommitOffset(topicPartition: p1, offset: 30),
        ])
        let committed = try await first.committedOffsets(for: [p0, p1])
        #expect(committed[p0] == 20)
        #expect(committed[p1] == 30)
        await first.close()

        let second = try KafkaTest.consumer(cluster.bootstrapServers, group: group)
        try second.subscribe(topics: [topic])
        let reread = try await KafkaTest.collect(second.events, messages: 50)
        await second.close()
        let offsets = Dictionary(grouping: reread, by: \.topicPartition).mapValues { $0.map(\.offset).sorted() }
        #expect(offsets[p0] == Array(20..<50))
        #expect(offsets[p1] == Array(30..<50))
    }

    // Two group formations and a rebalance on the mock (~3 s each) plus the whole suite sharing two cores: ~40 s in a
    // full run, so the hang guard is two minutes.
    @Test(
        "two members split the partitions; when one leaves the other takes over, nothing lost", .timeLimit(.minutes(2)))
    func membersSplitAndTakeOver() async throws {
        let topic = "kt-split"
        let cluster = try KafkaTest.cluster(topics: [topic: 4])
        let producer = try KafkaTest.producer(cluster)
        let group = KafkaTest.uniqueGroup("split")

        struct Member: Sendable {
            var assignment: Set<KafkaTopicPartition> = []
            var values: [String] = []
            var finished: [KafkaTopicPartition: Int64] = [:]
        }
        struct State: Sendable {
            var members: [String: Member] = ["a": Member(), "b": Member()]
            var allValues: Set<String> { Set(members.values.flatMap(\.values)) }
        }
        let progress = KafkaTestProgress(State())

        /// Runs a member: records each message as finished, commits finished offsets in the revoke hook.
        func start(_ name: String) throws -> (KafkaConsumer, Task<Void, any Error>) {
            let consumerBox = Mutex<KafkaConsumer?>(nil)
            let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: group) { revoked in
                let offsets =
                    progress.state.members[name]?.finished.filter { revoked.partitions.contains($0.key) } ?? [:]
                guard let consumer = consumerBox.withLock({ $0 }) else { return }
                try? await consumer.commit(offsets.map { KafkaCommitOffset(topicPartition: $0.key, offset: $0.value) })
            }
            consumerBox.withLock { $0 = consumer }
            try consumer.subscribe(topics: [topic])
            let task = Task {
                for try await event in consumer.events {
                    switch event {
                    case .partitionsAssigned(let partitions, _, _, _):
                        progress.update { $0.members[name]?.assignment = Set(partitions) }
                    case .partitionsRevoked:
                        progress.update { $0.members[name]?.assignment = [] }
                    case .rewound:
                        break
                    case .message(let message):
                        progress.update {
                            $0.members[name]?.values.append(KafkaTest.text(message.value))
                            $0.members[name]?.finished[message.topicPartition] = message.offset + 1
                        }
                    }
                }
            }
            return (consumer, task)
        }

        _ = try await KafkaTest.produce(producer, topic: topic, count: 200, prefix: "split", partitions: 4)
        let (a, aTask) = try start("a")
        await progress.wait { $0.members["a"]?.assignment.count == 4 }
        let (b, bTask) = try start("b")
        await progress.wait { state in
            guard let a = state.members["a"]?.assignment, let b = state.members["b"]?.assignment else { return false }
            return a.count == 2 && b.count == 2 && a.isDisjoint(with: b)
        }
        _ = try await KafkaTest.produce(producer, topic: topic, count: 200, prefix: "split2", partitions: 4)
        await progress.wait { state in state.members["b"].map { !$0.values.isEmpty } ?? false }

        await b.close()
        try await bTask.value
        await progress.wait { $0.members["a"]?.assignment.count == 4 }
        _ = try await KafkaTest.produce(producer, topic: topic, count: 200, prefix: "split3", partitions: 4)
        let expected = Set(
            (0..<200).flatMap { index in
                ["split", "split2", "split3"].map { KafkaTest.text(KafkaTest.value($0, index)) }
            })
        await progress.wait { $0.allValues == expected }
        await a.close()
        try await aTask.value
        await producer.shutdown()
        #expect(progress.state.allValues == expected)
    }

    @Test("a paused partition delivers nothing until it is resumed", .timeLimit(.minutes(2)))
    func pauseAndResume() async throws {
        let topic = "kt-pause"
        let cluster = try KafkaTest.cluster(topics: [topic: 2])
        let producer = try KafkaTest.producer(cluster)
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("pause"))
        try consumer.subscribe(topics: [topic])
        let assigned = try await KafkaTest.awaitAssignment(consumer.events)
        #expect(assigned.count == 2)
        let paused = KafkaTopicPartition(topic: topic, partition: 0)
        try consumer.pause([paused])

        // Partition 0 gets its messages first, so an unpaused fetcher would see them before partition 1's.
        for index in 0..<20 {
            _ = try await producer.send(
                KafkaProducerRecord(topic: topic, partition: 0, value: KafkaTest.value("paused", index)))
        }
        for index in 0..<20 {
            _ = try await producer.send(
                KafkaProducerRecord(topic: topic, partition: 1, value: KafkaTest.value("running", index)))
        }
        var seenFromPaused = 0
        let running = try await KafkaTest.collect(consumer.events, messages: 20) { message in
            if message.topicPartition == paused { seenFromPaused += 1 }
            return message.partition == 1
        }
        #expect(running.count == 20)
        #expect(seenFromPaused == 0)

        try consumer.resume([paused])
        let resumed = try await KafkaTest.collect(consumer.events, messages: 20)
        #expect(resumed.allSatisfy { $0.topicPartition == paused })
        #expect(resumed.map(\.offset) == Array(0..<20))
        await consumer.close()
        await producer.shutdown()
    }

    @Test(
        "a rewound partition is read again from the offset asked for, after a rewound event and nothing read before it",
        .timeLimit(.minutes(2)))
    func rewind() async throws {
        let topic = "kt-rewind"
        let cluster = try KafkaTest.cluster(brokers: 1, topics: [topic: 1])
        let producer = try KafkaTest.producer(cluster)
        _ = try await KafkaTest.produce(producer, topic: topic, count: 50, prefix: "r", partitions: 1)
        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("rewind"))
        try consumer.subscribe(topics: [topic])
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        #expect(try await KafkaTest.awaitAssignment(consumer.events) == [partition])
        let first = try await KafkaTest.collect(consumer.events, messages: 30)
        #expect(first.map(\.offset) == Array(0..<30))

        consumer.rewind(partition, to: 10)
        // A rewind of a partition this member does not hold is dropped, not retried for ever.
        consumer.rewind(KafkaTopicPartition(topic: topic, partition: 7), to: 0)
        var beforeEvent: [Int64] = []
        var afterEvent: [Int64] = []
        var rewound: [KafkaCommitOffset] = []
        for try await event in consumer.events {
            switch event {
            case .rewound(let rewoundPartition, let offset):
                rewound.append(KafkaCommitOffset(topicPartition: rewoundPartition, offset: offset))
            case .message(let message) where rewound.isEmpty:
                beforeEvent.append(message.offset)
            case .message(let message):
                afterEvent.append(message.offset)
            default:
                break
            }
            if afterEvent.count == 40 { break }
        }
        #expect(rewound == [KafkaCommitOffset(topicPartition: partition, offset: 10)])
        // Messages buffered before the seek may arrive before the event, never after it.
        #expect(beforeEvent == Array(30..<Int64(30 + beforeEvent.count)))
        #expect(afterEvent == Array(10..<50))

        // A pause right after a rewind (a worker at its in-flight bound) keeps the rewound position.
        consumer.rewind(partition, to: 20)
        for try await event in consumer.events {
            if case .rewound = event { break }
        }
        try consumer.pause([partition])
        try consumer.resume([partition])
        let again = try await KafkaTest.collect(consumer.events, messages: 30)
        #expect(again.map(\.offset) == Array(20..<50))
        await consumer.close()
        await producer.shutdown()
    }

    @Test(
        "messages produced while a broker is down are delivered once it is up, none lost", .timeLimit(.minutes(2)))
    func brokerDownAndUp() async throws {
        let topic = "kt-down"
        let cluster = try KafkaTest.cluster(brokers: 3, topics: [topic: 6])
        let producer = try KafkaTest.producer(
            cluster,
            properties: [
                "reconnect.backoff.max.ms": "500", "topic.metadata.refresh.interval.ms": "1000",
                // In the full suite the sends left after the broker came back once took 59 s, in other runs 10 s
                // (alone: under 1 s); librdkafka abandons a request on a silent connection after
                // socket.timeout.ms, 60 s by default, which the 59 s matches. 10 s bounds such a stall well inside
                // the test's limit.
                "socket.timeout.ms": "10000",
            ])
        // Warm up so the producer knows every leader.
        _ = try await KafkaTest.produce(producer, topic: topic, count: 60, prefix: "warm", partitions: 6)

        try cluster.setBrokerDown(2)
        let delivered = KafkaTestProgress(0)
        let sending = Task {
            try await KafkaTest.produce(
                producer, topic: topic, count: 600, prefix: "down", partitions: 6, confirmed: true
            ) {
                _ in delivered.update { $0 += 1 }
            }
        }
        // Partitions led by brokers 1 and 3 keep going. Broker 2's third usually waits, but the mock cluster of
        // librdkafka 2.0.2 does not always hold them back (a fresh CI run once saw all 600 delivered while "down"),
        // so what is asserted is the promise: every message stored where its report says, none lost.
        await delivered.wait { $0 >= 100 }
        try cluster.setBrokerUp(2)
        let reports = try await sending.value
        let stored = try await KafkaTest.storedCount(producer, topic: topic, partitions: 6)
        let resends = producer.confirmationResends
        await producer.shutdown()
        #expect(reports.count == 600)
        #expect(reports.allSatisfy { $0.hasOffset })
        #expect((660...(660 + resends)).contains(stored), "only a resend may store a message twice")

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("down"))
        try consumer.subscribe(topics: [topic])
        let messages = try await KafkaTest.collect(consumer.events, messages: stored)
        await consumer.close()
        let values = Set(messages.map { KafkaTest.text($0.value) })
        #expect(values.count == 660)
        #expect(values.isSuperset(of: (0..<600).map { KafkaTest.text(KafkaTest.value("down", $0)) }))
        KafkaTest.expectReportsName(reports, prefix: "down", in: messages)
    }

    @Test(
        "injected produce errors are retried: every confirmed message is stored where its report says, none lost",
        .timeLimit(.minutes(2)))
    func injectedRequestErrorsAreRetried() async throws {
        let topic = "kt-errors"
        let cluster = try KafkaTest.cluster(topics: [topic: 3])
        let producer = try KafkaTest.producer(cluster, properties: ["retry.backoff.ms": "10"])
        _ = try await producer.send(KafkaProducerRecord(topic: topic, partition: 0, value: KafkaTest.value("first", 0)))
        cluster.pushRequestErrors(
            .produce,
            [
                .notLeaderForPartition, .requestTimedOut, .notEnoughReplicas, .leaderNotAvailable, .transport,
                .notEnoughReplicasAfterAppend, .notLeaderForPartition,
            ])
        // Plain `send` is not enough here: after `REQUEST_TIMED_OUT` librdkafka 2.0.2 may acknowledge a message
        // without an offset that the broker never stored (a CI run once saw one go missing so).
        let reports = try await KafkaTest.produce(
            producer, topic: topic, count: 500, prefix: "retry", partitions: 3, confirmed: true)
        let stored = try await KafkaTest.storedCount(producer, topic: topic, partitions: 3)
        let resends = producer.confirmationResends
        await producer.shutdown()
        #expect(reports.count == 500)
        #expect(reports.allSatisfy { $0.hasOffset })
        #expect(Set(reports.map { "\($0.topicPartition)@\($0.offset)" }).count == 500)
        #expect((501...(501 + resends)).contains(stored), "only a resend may store a message twice")

        let consumer = try KafkaTest.consumer(cluster.bootstrapServers, group: KafkaTest.uniqueGroup("errors"))
        try consumer.subscribe(topics: [topic])
        let messages = try await KafkaTest.collect(consumer.events, messages: stored)
        await consumer.close()
        #expect(Set(messages.map { KafkaTest.text($0.value) }).count == 501, "none lost")
        KafkaTest.expectReportsName(reports, prefix: "retry", in: messages)
        // Offsets are dense per partition: nothing was skipped.
        for (_, partitionMessages) in Dictionary(grouping: messages, by: \.partition) {
            #expect(partitionMessages.map(\.offset).sorted() == Array(0..<Int64(partitionMessages.count)))
        }
    }

    @Test("configuration errors name the property", .timeLimit(.minutes(2)))
    func configurationErrorsNameTheKey() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(configuration: KafkaProducerConfiguration(properties: ["no.such.property": "1"]))
        }
        #expect(error?.message.contains("\"no.such.property\"") == true)
        #expect(error?.isRetryable == false)
        #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(groupID: "g", assignmentStrategy: "cooperative-sticky"))
        }
        #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(groupID: "g", properties: ["enable.auto.commit": "true"]))
        }
    }

    @Test("error codes know whether to retry", .timeLimit(.minutes(2)))
    func errorClassification() {
        #expect(KafkaError(code: .notLeaderForPartition, message: "x").isRetryable)
        #expect(KafkaError(code: .queueFull, message: "x").isRetryable)
        #expect(!KafkaError(code: .invalidArgument, message: "x").isRetryable)
        #expect(!KafkaError(code: .transport, message: "x", isFatal: true).isRetryable)
        #expect(KafkaError.Code.queueFull.name == "_QUEUE_FULL")
        // Permanent: the same produce can never succeed; retrying it stalls the partition.
        for code: KafkaError.Code in [
            .messageSizeTooLarge, .recordListTooLarge, .topicAuthorizationFailed, .clusterAuthorizationFailed,
            .unknownTopic, .unknownTopicOrPartition, .unknownPartition, .invalidRecord,
        ] {
            let error = KafkaError(code: code, message: "x")
            #expect(error.isPermanent && !error.isRetryable && !error.isFatal, "\(code)")
            #expect(error.description.contains("[permanent]"))
        }
        for code: KafkaError.Code in [.requestTimedOut, .messageTimedOut, .queueFull, .transport, .deliveryUnproven] {
            #expect(!KafkaError(code: code, message: "x").isPermanent, "\(code)")
        }
        #expect(!KafkaError(code: .messageSizeTooLarge, message: "x", isFatal: true).isPermanent)
    }

    @Test("the mock cluster's control language", .timeLimit(.minutes(2)))
    func controlCommands() throws {
        let cluster = try MockKafkaCluster(brokers: 2)
        #expect(cluster.perform(controlCommand: "down 1") == "ok down 1")
        #expect(cluster.perform(controlCommand: "up 1") == "ok up 1")
        #expect(cluster.perform(controlCommand: "errors 0 2 6") == "ok errors 0 2 6")
        #expect(cluster.perform(controlCommand: "clear-errors 0") == "ok clear-errors 0")
        #expect(cluster.perform(controlCommand: "topic extra 3") == "ok topic extra 3")
        #expect(cluster.perform(controlCommand: "explode now").hasPrefix("error"))
        #expect(cluster.perform(controlCommand: "errors 0 x 6").hasPrefix("error"))
    }
}

@Suite("Kafka: librdkafka version differences")
struct KafkaVersionTests {
    @Test("rd_kafka_seek_partitions gets milliseconds × 1,000 before librdkafka 2.1.0, milliseconds from 2.1.0 on")
    func seekTimeoutUnit() {
        let version202 = 0x0200_02ff
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 5_000, version: version202) == 5_000_000)
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 5_000, version: 0x0106_01ff) == 5_000_000)
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 5_000, version: 0x0201_00ff) == 5_000)
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 5_000, version: 0x0203_00ff) == 5_000)
        // 0 (do not wait) and -1 (wait without end) mean the same in both units.
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 0, version: version202) == 0)
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: -1, version: version202) == -1)
        // Clamped, never wrapped into a negative (endless) wait.
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 10_000_000, version: version202) == Int32.max)
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: Int.max, version: version202) == Int32.max)
    }

    @Test("the linked librdkafka is the one the project targets, so the seek gets microseconds")
    func linkedVersion() {
        // Updating librdkafka to 2.1 or later makes this fail on purpose: then check the other version workarounds
        // (README: implicit acknowledgements, the fetch stall wake-up) and update this expectation.
        #expect(
            RDKafkaVersion.linked >> 8 == 0x02_00_02, "linked librdkafka \(String(RDKafkaVersion.linked, radix: 16))")
        #expect(RDKafkaVersion.seekTimeoutArgument(milliseconds: 5_000) == 5_000_000)
    }
}
