import Hummingbird
import NIOCore

/// The simulator's request context: Hummingbird's basic one plus the event loop of the request's connection, on
/// which injected latency is scheduled (a timer in the loop's queue, rather than one `Task.sleep` per request).
struct SimulatorRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The event loop of the connection the request came on.
    let eventLoop: any EventLoop

    init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        eventLoop = source.channel.eventLoop
    }
}

extension EventLoop {
    /// Waits `milliseconds` on this event loop's timer queue. Returns early (without error) when the task is
    /// cancelled, as `try? await Task.sleep` did.
    func simulatorDelay(milliseconds: Double) async {
        let delay = TimeAmount.nanoseconds(Int64((milliseconds * 1_000_000).rounded()))
        let scheduled = scheduleTask(in: delay) {}
        await withTaskCancellationHandler {
            _ = try? await scheduled.futureResult.get()
        } onCancel: {
            scheduled.cancel()
        }
    }
}
