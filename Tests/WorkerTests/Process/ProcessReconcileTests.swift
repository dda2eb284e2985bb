import Crypto
import Foundation
import Observability
import Operations
import Testing
import Traffic

/// `verify-worker reconcile` as an operator runs it: replicas against the Apple simulator process
/// and one SQLite ledger: one holds the lease and sweeps, the other waits; SIGTERM gives the lease up, exit 0, and the
/// other takes over; a missing Server API key stops it at start with exit 2 and one line naming the key.
@Suite("Process: verify-worker reconcile", .serialized, .timeLimit(.minutes(2)))
struct ProcessReconcileTests {
    static func environment(_ stack: ProcessTestStack, id: String, port: Int) -> [String: String] {
        let environment = stack.workerEnvironment(
            workerID: id, metricsPort: port,
            overrides: [
                "VERIFY_SERVER_API_PRODUCTION_URL": stack.simulatorURL.absoluteString,
                "VERIFY_SERVER_API_SANDBOX_URL": stack.simulatorURL.appendingPathComponent("sandbox").absoluteString,
                "VERIFY_SERVER_API_KEY": P256.Signing.PrivateKey().pemRepresentation,
                "VERIFY_SERVER_API_KEY_ID": "PROCESSKEY", "VERIFY_SERVER_API_ISSUER_ID": "issuer",
                "VERIFY_RECONCILE_INTERVAL_S": "1", "VERIFY_RECONCILE_LEASE_S": "5",
            ])
        return environment
    }

    static func metric(_ name: String, port: Int) async -> Double? {
        guard let answer = await ProcessTest.get(URL(string: "http://127.0.0.1:\(port)/metrics")!),
            answer.status == 200
        else { return nil }
        let values = PrometheusTextSample(answer.body).values(of: name)
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    @Test("two replicas: one sweeps; SIGTERM gives the lease up (exit 0) and the other takes over")
    func replicas() async throws {
        try await ProcessTestStack.withStack { stack, _ in
            let portA = try FreeLocalPort.pick()
            let a = try ProcessTestChild(
                name: "reconcile-a", arguments: ["reconcile"],
                environment: Self.environment(stack, id: "reconcile-a", port: portA),
                stderrFile: stack.directory.appendingPathComponent("reconcile-a.log"))
            defer { a.signal(SIGKILL) }
            try await ProcessTest.eventually("replica a holds the lease and finished a sweep", within: .seconds(40)) {
                guard a.isRunning else { throw ProcessTestFailure("reconcile-a exited:\n\(a.logTail())") }
                let held = await Self.metric(MetricNames.reconcileLeaseHeld, port: portA)
                let checkpoint = await Self.metric(MetricNames.reconcileCheckpoint, port: portA)
                return held == 1 && (checkpoint ?? 0) > 0
            }
            #expect(await ProcessTest.get(URL(string: "http://127.0.0.1:\(portA)/readyz")!)?.status == 200)

            let portB = try FreeLocalPort.pick()
            let b = try ProcessTestChild(
                name: "reconcile-b", arguments: ["reconcile"],
                environment: Self.environment(stack, id: "reconcile-b", port: portB),
                stderrFile: stack.directory.appendingPathComponent("reconcile-b.log"))
            defer { b.signal(SIGKILL) }
            try await ProcessTest.eventually("replica b runs and waits", within: .seconds(40)) {
                guard b.isRunning else { throw ProcessTestFailure("reconcile-b exited:\n\(b.logTail())") }
                return await Self.metric(MetricNames.reconcileLeaseHeld, port: portB) == 0
            }
            #expect(await Self.metric(MetricNames.reconcileLeaseHeld, port: portA) == 1)

            a.signal(SIGTERM)
            #expect(try await a.exitStatus(within: .seconds(30)) == 0, "\(a.logTail())")
            // Released at stop: b takes over at its next sweep, well before a's 5 s lease would have expired.
            try await ProcessTest.eventually("replica b takes over", within: .seconds(20)) {
                await Self.metric(MetricNames.reconcileLeaseHeld, port: portB) == 1
            }
            b.signal(SIGTERM)
            #expect(try await b.exitStatus(within: .seconds(30)) == 0, "\(b.logTail())")
        }
    }

    @Test("without a Server API key: exit 2 and one line naming server_api_key")
    func missingKey() async throws {
        try await ProcessTestStack.withStack { stack, _ in
            var environment = Self.environment(stack, id: "reconcile-nokey", port: try FreeLocalPort.pick())
            environment["VERIFY_SERVER_API_KEY"] = nil
            let child = try ProcessTestChild(
                name: "reconcile-nokey", arguments: ["reconcile"], environment: environment,
                stderrFile: stack.directory.appendingPathComponent("reconcile-nokey.log"))
            #expect(try await child.exitStatus(within: .seconds(20)) == 2)
            let lines = child.standardError.split(separator: "\n")
            #expect(lines.count == 1, "\(child.standardError)")
            #expect(lines.first?.contains("server_api_key") == true)
        }
    }
}
