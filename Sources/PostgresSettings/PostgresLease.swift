import PostgresNIO
import Synchronization

/// One operation's access to the pool. It records whether the operation got a connection, and counts the
/// connections every operation of the store got (`granted`), so that an operation still waiting at the connect
/// timeout can tell a server that is down (nobody got one since it started) from a pool that is only busy.
public final class PostgresLease: Sendable {
    let client: PostgresClient
    let granted: LeaseCounter
    let grantedAtStart: Int
    let connected = Atomic<Bool>(false)

    public init(client: PostgresClient, granted: LeaseCounter) {
        self.client = client
        self.granted = granted
        self.grantedAtStart = granted.value.load(ordering: .acquiring)
    }

    /// True when the operation is stuck: it has no connection and nobody got one since it started.
    public var starved: Bool {
        !connected.load(ordering: .acquiring) && granted.value.load(ordering: .acquiring) == grantedAtStart
    }

    public func withConnection<R>(_ body: (PostgresConnection) async throws -> R) async throws -> R {
        try await client.withConnection { connection in
            connected.store(true, ordering: .releasing)
            _ = granted.value.wrappingAdd(1, ordering: .releasing)
            return try await body(connection)
        }
    }
}

/// How many connections a store's operations have leased (wrapping), see ``PostgresLease``.
public final class LeaseCounter: Sendable {
    let value = Atomic<Int>(0)

    public init() {}
}
