import AppleClients
import Foundation
import StoreHTTP
/// The Apple simulator in a process of its own (`verify-worker apple-sim --port 0`), so that a benchmark of the
/// client is not charged for the simulator's work (its handlers, its sleeping requests) in the same runtime.
public struct SimulatorChildProcess: Sendable {
    public let process: ChildProcess
    /// `http://127.0.0.1:PORT`, as the child printed it.
    public let baseURL: String

    /// Why the simulator did not come up.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts `executable apple-sim --port 0` (plus `arguments`, with `environment` over this process's; it ends with
    /// this process) and waits for its `listening=` line.
    public static func start(
        executable: String, arguments: [String] = [], environment: [String: String] = [:],
        readyTimeout: Duration = .seconds(120)
    ) async throws -> SimulatorChildProcess {
        let process = try ChildProcess(
            name: "apple-sim", executable: executable, arguments: ["apple-sim", "--port", "0"] + arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new }, readsLines: true,
            exitsWithParent: true)
        let line = await process.waitForLine(timeout: readyTimeout) { $0.hasPrefix("listening=") }
        guard let line else {
            let exit = await process.stop(grace: .seconds(5))
            throw Failure(
                description:
                    "apple-sim printed no listening= line within \(readyTimeout) (\(exit.map { "\($0)" } ?? "still running"))"
            )
        }
        return SimulatorChildProcess(process: process, baseURL: String(line.dropFirst("listening=".count)))
    }

    /// SIGTERM (SIGKILL after `grace`), then reaps the child.
    @discardableResult
    public func stop(grace: Duration = .seconds(10)) async -> ChildProcess.Exit? {
        await process.stop(grace: grace)
    }
}

/// The simulator's control endpoints (`/sim/*`) over any ``HTTPTransport``, for benchmarks that run it elsewhere.
public struct SimulatorControl: Sendable {
    public var transport: any HTTPTransport
    public var baseURL: String

    /// A control client for the simulator at `baseURL` (`http://HOST:PORT`).
    public init(transport: any HTTPTransport, baseURL: String) {
        self.transport = transport
        self.baseURL = baseURL
    }

    /// Why a control call failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// `POST /sim/mint` of a production app receipt; returns the base64 receipt.
    public func mintAppReceipt(bundleID: String, productID: String) async throws -> String {
        // Foundation's JSON: the harness needs no access to the Apple clients' own JSON helpers.
        let request: [String: String] = [
            "format": "app_receipt", "environment": "Production", "bundle_id": bundleID, "product_id": productID,
        ]
        let body = [UInt8](try JSONSerialization.data(withJSONObject: request, options: [.sortedKeys]))
        let answer = try await post("sim/mint", body: body)
        let object = try? JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any]
        guard let receipt = object?["receipt"] as? String else {
            throw Failure(description: "/sim/mint answered without a receipt")
        }
        return receipt
    }

    /// `POST /sim/faults` with only an added latency (every other fault off).
    public func setLatency(milliseconds: Int) async throws {
        _ = try await post("sim/faults", body: Array(#"{"latency_ms":\#(max(milliseconds, 0))}"#.utf8))
    }

    private func post(_ path: String, body: [UInt8]) async throws -> [UInt8] {
        let response = try await transport.postJSON(baseURL + "/" + path, body: body, timeout: .seconds(30))
        guard response.status == 200 else {
            throw Failure(description: "/\(path) answered HTTP \(response.status)")
        }
        return response.body
    }
}
