import AppleClients
import Foundation
import Operations
import StoreHTTP
import Traffic
import Worker

/// A worker run as a child process (`verify-worker run`), so its memory and metrics are its own: the mock cluster,
/// the simulator and the traffic generator stay in the parent. Configured through `VERIFY_…` environment
/// variables, its metrics port on 127.0.0.1, its log (warnings and up) in a file of the run's directory.
package final class DemoWorkerProcess: Sendable {
    package let index: Int
    package let metricsPort: Int
    package let logFile: URL
    private let process: ChildProcess

    /// Starts `executable run` with `settings` (configuration key names to values) as its environment.
    package init(index: Int, executable: URL, settings: [String: String], directory: URL) throws {
        self.index = index
        metricsPort = try FreeLocalPort.pick()
        logFile = directory.appendingPathComponent("worker-\(index).log")
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VERIFY_") }
        for (name, value) in settings {
            guard let key = WorkerConfiguration.key(named: name) else {
                throw DemoWorkerProcessError("unknown worker setting \(name)")
            }
            environment[key.environmentName] = value
        }
        environment["VERIFY_METRICS_HOST"] = "127.0.0.1"
        environment["VERIFY_METRICS_PORT"] = String(metricsPort)
        environment["VERIFY_LOG_FORMAT"] = "text"
        environment["VERIFY_LOG_LEVEL"] = "warning"
        // The child ends with the demo or bench, even when that one crashes or is stopped with Ctrl-C.
        process = try ChildProcess(
            name: "worker-\(index)", executable: executable.path, arguments: ["run"], environment: environment,
            logFile: logFile, exitsWithParent: true)
    }

    package var pid: Int32 { process.pid }

    package var hasExited: Bool { process.exit != nil }

    /// The worker's `/metrics`, or nil while it does not answer.
    ///
    /// Through the project's curl engine, not URLSession, which deadlocked here when a task awaiting it was
    /// cancelled, and which on Linux crashes libdispatch when a socket closes under its dispatch source (refused
    /// connections to a stopping worker are the known trigger). The request runs in a task of its own, which the
    /// caller's cancellation does not reach, and ends by itself within its 5 s timeout.
    package func metrics() async -> PrometheusTextSample? {
        let url = "http://127.0.0.1:\(metricsPort)/metrics"
        let text = await Task {
            guard let engine = try? Self.http.get(),
                let response = try? await engine.execute(TransportRequest(url: url, timeout: .seconds(5))),
                response.status == 200
            else { return String?.none }
            return String(decoding: response.body, as: UTF8.self)
        }.value
        return text.map(PrometheusTextSample.init)
    }

    /// One engine for the `/metrics` of every worker child of the run.
    private static let http = Result { try CurlHTTPEngine() }

    /// The worker's resident memory (`/proc/PID/status`).
    package func memory() -> ProcessMemory? { process.memory() }

    /// The CPU time the worker has used so far.
    package func cpuTime() -> ProcessCPUTime? { process.cpuTime() }

    /// SIGTERM (the worker drains and commits), then SIGKILL if it has not exited within `grace`.
    /// Returns the exit status (nil if it did not even die of SIGKILL).
    @discardableResult
    package func stop(grace: Duration = .seconds(20)) async -> Int32? {
        await process.stop(grace: grace)?.status
    }

    /// The exit status, or nil if the process is still running after `limit`.
    package func waitForExit(within limit: Duration) async -> Int32? {
        await process.waitForExit(timeout: limit)?.status
    }
}

/// A worker child could not be started or did not come up.
package struct DemoWorkerProcessError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
