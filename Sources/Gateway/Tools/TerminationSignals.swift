import Dispatch
import Foundation
import Synchronization

/// Turns SIGTERM/SIGINT into an awaitable event (Dispatch signal sources; the default action is disabled so the
/// command can finish its work and exit 0). For the command-line tools; the gateway itself uses its
/// ServiceGroup's graceful shutdown.
public final class TerminationSignals: Sendable {
    private let fired: SignalLatch
    /// Kept for the object's lifetime; the sources stop delivering if released.
    private let sources: [SignalSourceBox]

    public init(_ signals: [Int32] = [SIGTERM, SIGINT]) {
        var boxes: [SignalSourceBox] = []
        let fired = SignalLatch()
        self.fired = fired
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                fired.fire()
            }
            source.resume()
            boxes.append(SignalSourceBox(source))
        }
        self.sources = boxes
    }

    /// Returns once one of the signals arrived (at once if one already did), or when the task is cancelled.
    public func wait() async {
        let fired = self.fired
        let id = fired.state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = fired.state.withLock { state -> Bool in
                    if state.done || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = fired.state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// True once one of the signals arrived.
    public var hasFired: Bool { fired.state.withLock { $0.done } }
}

/// Whether a signal arrived, and who waits for one.
private final class SignalLatch: Sendable {
    struct State {
        var done = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextID = 0
    }

    let state = Mutex(State())

    func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Holds a Dispatch signal source.
///
/// `@unchecked Sendable`: the source is only created, resumed and kept alive here; Dispatch sources are
/// thread-safe and the box never mutates it.
private final class SignalSourceBox: @unchecked Sendable {
    let source: any DispatchSourceSignal
    init(_ source: any DispatchSourceSignal) { self.source = source }
    deinit { source.cancel() }
}
