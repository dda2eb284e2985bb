import AppleSimulator
import Logging
import ServiceLifecycle

/// Runs the long-running parts a harness command starts in its own process (simulator servers, verdict readers) as
/// services of one `ServiceGroup` while `body` works, then shuts the group down gracefully, in reverse order, and
/// waits for it: the lifecycle of `run`, `gateway`, `apple-sim` and `dev-broker`, for `demo`, `bench` and `chaos`.
///
/// A service that fails, or returns before the group asks it to stop, ends the group with its error; `body` is not
/// interrupted (it finds the service gone), and the group's error is thrown once it returns.
package enum HarnessServices {
    package static func run<T>(
        _ services: [any Service], logger: Logger, body: () async throws -> T
    ) async throws -> T {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                // Named by type: the default name reflects the whole value into the group's debug lines.
                services: services.map { .init(service: $0, serviceName: "\(type(of: $0))") },
                logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let result: Result<T, any Error>
            do {
                result = .success(try await body())
            } catch {
                result = .failure(error)
            }
            await group.triggerGracefulShutdown()
            // The body's error first: a service that ended because of it says less.
            if case .failure(let error) = result {
                try? await tasks.waitForAll()
                throw error
            }
            try await tasks.waitForAll()
            return try result.get()
        }
    }
}

/// The in-process Apple simulator as a service: its HTTP server stops when the group shuts down.
package struct SimulatorService: Service {
    package let simulator: AppleSimulator

    package init(_ simulator: AppleSimulator) { self.simulator = simulator }

    package func run() async throws { try await simulator.run() }
}

/// A part that runs until it is cancelled (a store's background work, an HTTP server), as a service: the group's
/// graceful shutdown cancels it, and its cancellation is its end.
package struct TaskService: Service {
    package let work: @Sendable () async throws -> Void

    package init(_ work: @escaping @Sendable () async throws -> Void) { self.work = work }

    package func run() async throws {
        do {
            try await cancelWhenGracefulShutdown { try await work() }
        } catch is CancellationError {
        }
        // A part that ended on its own waits for the group's stop: an early return would read as a failure.
        try? await gracefulShutdown()
    }
}
