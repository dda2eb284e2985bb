import Synchronization

/// Hands a server's bound port to whoever awaits it: the port once the server listens, or why it never will.
public final class PortReadiness: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Int, any Error>])
        case ready(Int)
        case failed(any Error)
    }

    private let state = Mutex(State.waiting([]))

    public init() {}

    /// The port, once the server listens.
    public var port: Int? {
        state.withLock { state in
            if case .ready(let port) = state { return port }
            return nil
        }
    }

    public func ready(port: Int) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int, any Error>] in
            guard case .waiting(let waiters) = state else { return [] }
            state = .ready(port)
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: port) }
    }

    public func fail(_ error: any Error) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int, any Error>] in
            guard case .waiting(let waiters) = state else { return [] }
            state = .failed(error)
            return waiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// Runs `server`, which calls ``ready(port:)`` once it listens and serves until cancelled, and fails the waiters
    /// if it ends without having listened: with its error, or with `stoppedEarly` when it returned.
    public func serve(
        stoppedEarly: @autoclosure () -> any Error, _ server: () async throws -> Void
    ) async throws {
        do {
            try await server()
            fail(stoppedEarly())
        } catch {
            fail(error)
            throw error
        }
    }

    public func wait() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let immediate = state.withLock { state -> Result<Int, any Error>? in
                switch state {
                case .waiting(var waiters):
                    waiters.append(continuation)
                    state = .waiting(waiters)
                    return nil
                case .ready(let port): return .success(port)
                case .failed(let error): return .failure(error)
                }
            }
            if let immediate { continuation.resume(with: immediate) }
        }
    }
}
