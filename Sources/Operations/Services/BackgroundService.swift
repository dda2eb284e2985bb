import ServiceLifecycle

/// A part that runs until it is cancelled (a ledger's or a store's pool, a watch, a sweep): on graceful shutdown it
/// is cancelled, and its cancellation is its end. Work that ends on its own earlier is not a reason to stop the
/// command: the service then waits for its turn to stop, since the group takes a service that ends out of turn for a
/// failure.
public struct BackgroundService: Service {
    let name: String
    let work: @Sendable () async throws -> Void
    /// Run once the service stops (the call gate's shutdown, the HTTP engine's).
    let cleanUp: @Sendable () -> Void
    /// Started only once this is resolved true (the operations port listens): a command refused at start says one
    /// line, the configuration error, and nothing else.
    let after: OneShot<Bool>?

    /// - Parameter name: what the part is, for a reader of the command's service list.
    public init(
        name: String, work: @escaping @Sendable () async throws -> Void, cleanUp: @escaping @Sendable () -> Void = {},
        after: OneShot<Bool>? = nil
    ) {
        self.name = name
        self.work = work
        self.cleanUp = cleanUp
        self.after = after
    }

    public func run() async throws {
        defer { cleanUp() }
        do {
            try await cancelWhenGracefulShutdown {
                if let after, await after.wait() != true { return }
                try await work()
            }
        } catch is CancellationError {
        }
        try? await gracefulShutdown()
    }
}

/// A service started once a gate opens (the entitlement service's parts wait for their schema). Unlike
/// ``BackgroundService`` the service handles graceful shutdown itself once it runs (a consumer drains, it is not
/// cancelled).
public struct GatedService: Service {
    let gate: OneShot<Bool>
    let service: any Service

    public init(gate: OneShot<Bool>, service: any Service) {
        self.gate = gate
        self.service = service
    }

    public func run() async throws {
        let open = await cancelWhenGracefulShutdown { await gate.wait() }
        guard open == true else { return }
        try await service.run()
    }
}
