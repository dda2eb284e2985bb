import Synchronization

/// Several ``CurlHTTPEngine``s behind one ``HTTPTransport``: each shard has its own multi handle, connection cache
/// and thread, and requests are spread over them round robin.
///
/// One engine's thread does all of libcurl's work for its transfers; past some thousands of calls per second it
/// is busy all the time and becomes the limit. Shards spread that work over more threads (and cores). Connection
/// limits are divided between the shards, so the group as a whole keeps the configured ones.
public final class ShardedCurlEngine: HTTPTransport {
    private let shards: [CurlHTTPEngine]
    private let next = Atomic<Int>(0)

    /// Starts `shards` engines (at least 1). Throws if libcurl cannot create one; those made are shut down.
    public init(shards count: Int, configuration: HTTPEngineConfiguration = HTTPEngineConfiguration()) throws {
        let count = max(count, 1)
        var perShard = configuration
        perShard.maximumHostConnections = Self.share(configuration.maximumHostConnections, of: count)
        perShard.maximumTotalConnections = Self.share(configuration.maximumTotalConnections, of: count)
        perShard.easyHandlePoolSize = Self.share(configuration.easyHandlePoolSize, of: count)
        var made: [CurlHTTPEngine] = []
        do {
            for _ in 0..<count { made.append(try CurlHTTPEngine(configuration: perShard)) }
        } catch {
            for engine in made { engine.shutdown() }
            throw error
        }
        shards = made
    }

    deinit {
        for engine in shards { engine.shutdown() }
    }

    /// How many engines requests are spread over.
    public var shardCount: Int { shards.count }

    /// Sends `request` on the next shard in turn. Same errors and cancellation as ``CurlHTTPEngine``.
    public func execute(_ request: TransportRequest) async throws -> TransportResponse {
        let turn = next.wrappingAdd(1, ordering: .relaxed).oldValue
        return try await shards[Int(UInt(bitPattern: turn) % UInt(shards.count))].execute(request)
    }

    /// Shuts every shard down (see ``CurlHTTPEngine/shutdown()``).
    public func shutdown() {
        for engine in shards { engine.shutdown() }
    }

    /// Each shard's counters, in shard order.
    public var shardStatistics: [CurlHTTPEngine.Statistics] { shards.map(\.statistics) }

    /// The shards' counters added up (busy time is the sum over threads, so it may exceed wall time).
    public var statistics: CurlHTTPEngine.Statistics {
        shardStatistics.reduce(
            CurlHTTPEngine.Statistics(
                completed: 0, connectionsOpened: 0, loopIterations: 0, busyTime: .zero, inFlight: 0)
        ) { total, shard in
            CurlHTTPEngine.Statistics(
                completed: total.completed + shard.completed,
                connectionsOpened: total.connectionsOpened + shard.connectionsOpened,
                loopIterations: total.loopIterations + shard.loopIterations,
                busyTime: total.busyTime + shard.busyTime, inFlight: total.inFlight + shard.inFlight)
        }
    }

    /// A limit divided over `count` shards, rounded up; 0 ("no limit") stays 0.
    static func share(_ limit: Int, of count: Int) -> Int {
        limit <= 0 ? limit : (limit + count - 1) / count
    }
}
