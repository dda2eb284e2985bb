import AppleClients
import ArgumentParser
import Foundation
import Gateway
import StoreHTTP

/// `verify-worker healthcheck`: the container's HEALTHCHECK (the runtime image has no curl binary).
struct HealthcheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Exits 0 if GET URL answers HTTP 200 within the timeout, 1 otherwise (one line on stderr).",
        discussion: "Plain HTTP to this host only (localhost, 127.0.0.1 or [::1]), e.g. http://127.0.0.1:9464/readyz."
    )

    @Option(help: "URL to probe, e.g. http://127.0.0.1:9464/readyz.")
    var url: String
    @Option(name: .customLong("timeout-ms"), help: "Time limit of the whole probe.")
    var timeoutMs: Int = 2_000

    func validate() throws {
        guard timeoutMs > 0 else { throw ValidationError("--timeout-ms must be positive") }
        if let problem = HealthProbe.problem(with: url) { throw ValidationError(problem) }
    }

    func run() async throws {
        let timeout = Duration.milliseconds(timeoutMs)
        let assessment: HealthProbe.Assessment
        do {
            let engine = try CurlHTTPEngine(
                configuration: HTTPEngineConfiguration(
                    maximumHostConnections: 1, maximumTotalConnections: 1, connectTimeout: timeout,
                    requestTimeout: timeout,
                    maximumResponseBytes: 1 << 20, easyHandlePoolSize: 1, userAgent: "verify-worker-healthcheck"))
            defer { engine.shutdown() }
            let response = try await engine.execute(TransportRequest(url: url, timeout: timeout))
            assessment = HealthProbe.assessment(url: url, status: response.status, body: response.body)
        } catch {
            assessment = HealthProbe.Assessment(isHealthy: false, line: "unhealthy: \(url): \(error)")
        }
        GatewayOutput.error(assessment.line)
        if !assessment.isHealthy { throw ExitCode(1) }
    }
}
