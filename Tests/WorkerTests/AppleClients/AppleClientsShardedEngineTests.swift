import Foundation
import Testing

@testable import AppleClients
@testable import StoreHTTP

@Suite("Apple clients: sharded curl engine", .serialized, .timeLimit(.minutes(2)))
struct AppleClientsShardedEngineTests {
    @Test("Concurrent calls are spread round robin over every shard")
    func spreadsOverShards() async throws {
        let engine = try ShardedCurlEngine(shards: 3)
        defer { engine.shutdown() }
        #expect(engine.shardCount == 3)
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/slow", AppleClientsFakeServer.Reply(body: Array("x".utf8), delay: .milliseconds(50)))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<30 {
                    group.addTask { try await engine.execute(TransportRequest(url: base + "/slow")).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 30)
            #expect(statuses.allSatisfy { $0 == 200 })
            #expect(engine.shardStatistics.map(\.completed) == [10, 10, 10])
            #expect(engine.statistics.completed == 30)
            #expect(engine.statistics.inFlight == 0)
        }
    }

    @Test("Cancelling calls running on different shards removes each transfer at once")
    func cancellationOnEveryShard() async throws {
        let engine = try ShardedCurlEngine(shards: 2)
        defer { engine.shutdown() }
        try await AppleClientsFakeServer.withRunning { server, base in
            server.setFallback("/hang", AppleClientsFakeServer.Reply(delay: .seconds(30)))
            let first = Task { try await engine.execute(TransportRequest(url: base + "/hang")) }
            _ = await server.nextArrival()
            let second = Task { try await engine.execute(TransportRequest(url: base + "/hang")) }
            _ = await server.nextArrival()
            #expect(engine.shardStatistics.map(\.inFlight) == [1, 1])
            first.cancel()
            second.cancel()
            for task in [first, second] {
                let result = await task.result
                #expect(throws: CancellationError.self) { try result.get() }
            }
            #expect(engine.shardStatistics.map(\.inFlight) == [0, 0])
        }
    }

    @Test("Connection limits are divided between the shards, rounded up; 0 (no limit) stays 0")
    func limitsAreShared() {
        #expect(ShardedCurlEngine.share(1024, of: 3) == 342)
        #expect(ShardedCurlEngine.share(1024, of: 1) == 1024)
        #expect(ShardedCurlEngine.share(0, of: 4) == 0)
        #expect(ShardedCurlEngine.share(1, of: 4) == 1)
    }
}
