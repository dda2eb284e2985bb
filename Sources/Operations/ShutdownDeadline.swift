import Foundation
import Logging
import Observability

#if canImport(Glibc)
    import Glibc
#endif

/// A last resort for a process asked to stop: if it has not exited by the deadline, it exits with status 1.
///
/// A worker drains within its drain timeout and then flushes and closes its Kafka clients, each step bounded; but
/// librdkafka's consumer close waits for the group coordinator, and with no broker reachable it can wait forever,
/// so a SIGTERM during a broker outage would leave the process running until the orchestrator kills it. What was not
/// committed is read again by the partitions' next owner, so exiting is safe; the status says it was not clean.
public enum ShutdownDeadline {
    /// Starts a thread (not a task: the cooperative pool may be the thing that is stuck) that ends the process after
    /// `limit`, logging one critical line first.
    public static func arm(after limit: Duration, logger: Logger) {
        let thread = Thread {
            Thread.sleep(
                forTimeInterval: Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
            logger.critical(
                "worker: shutdown deadline passed, exiting without a clean close",
                metadata: [LogKeys.shutdownLimit: "\(limit)"])
            fflush(nil)
            _exit(1)
        }
        thread.name = "shutdown-deadline"
        thread.start()
    }
}
