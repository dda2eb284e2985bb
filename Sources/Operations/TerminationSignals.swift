import Dispatch
import Foundation
import Synchronization

/// Turns SIGTERM and SIGINT into an awaitable event, so a command can drain and return normally (exit 0) instead
/// of being killed by the default action.
///
/// Create it once, early in the command (it replaces the default action of the signals it watches).
public final class TerminationSignals: Sendable {
    private let latch = SignalLatch()
    /// Kept for the process lifetime: the sources stop delivering when released.
    private let sources: Mutex<[any DispatchSourceSignal]>

    public init(watching signals: [Int32] = [SIGTERM, SIGINT]) {
        let latch = self.latch
        var sources: [any DispatchSourceSignal] = []
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { latch.fire(number) }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    /// The first signal received, or nil if none yet.
    public var received: Int32? { latch.received }

    /// Waits for the first signal and returns its number (at once if one came already).
    public func wait() async -> Int32 { await latch.wait() }
}

/// The first signal number, and the tasks waiting for it.
final class SignalLatch: Sendable {
    private struct State {
        var received: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    private let state = Mutex(State())

    var received: Int32? { state.withLock { $0.received } }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let received = state.withLock { state -> Int32? in
                if let received = state.received { return received }
                state.waiters.append(continuation)
                return nil
            }
            if let received { continuation.resume(returning: received) }
        }
    }

    func fire(_ number: Int32) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            guard state.received == nil else { return [] }
            state.received = number
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: number) }
    }
}
