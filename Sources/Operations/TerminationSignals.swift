import Dispatch
import Foundation
import Synchronization

/// Turns SIGTERM and SIGINT into an awaitable event, so a command can drain and return normally (exit 0) instead
/// of being killed by the default action.
///
/// Create it once, early in the command (it replaces the default action of the signals it watches).
public final class TerminationSignals: Sendable {
    private let latch = OneShot<Int32>()
    /// Kept for the process lifetime: the sources stop delivering when released.
    private let sources: Mutex<[any DispatchSourceSignal]>

    public init(watching signals: [Int32] = [SIGTERM, SIGINT]) {
        let latch = self.latch
        var sources: [any DispatchSourceSignal] = []
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { latch.resolve(number) }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    /// The first signal received, or nil if none yet.
    public var received: Int32? { latch.value }

    /// Waits for the first signal and returns its number (at once if one came already); nil if the task is
    /// cancelled first.
    @discardableResult
    public func wait() async -> Int32? { await latch.wait() }
}

extension TerminationSignals {
    /// Runs `work`; SIGTERM or SIGINT cancels it (a submission then stops reading and its sends in flight finish).
    /// Returns `work`'s result either way; nil only if the calling task is cancelled first.
    public func run<T: Sendable>(
        until work: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error>? {
        await withTaskGroup(of: Result<T, any Error>?.self) { group in
            group.addTask {
                do {
                    return .success(try await work())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                await self.wait()
                return nil
            }
            var result: Result<T, any Error>?
            while result == nil, let next = await group.next() {
                // The first to finish is the work (done) or the signal (cancel the work, keep waiting for it).
                group.cancelAll()
                result = next
            }
            return result
        }
    }
}
