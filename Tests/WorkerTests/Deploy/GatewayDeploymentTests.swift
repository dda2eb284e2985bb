import ArgumentParser
import Foundation
import Gateway
import Messages
import Operations
import Receipts
import Testing
import Traffic

/// The compose stack's gateway services: the gateway is there with a health check, and the load generator's command
/// line is one `verify-worker submit` accepts.
@Suite("Deployment files: gateway and load generator", .timeLimit(.minutes(2)))
struct GatewayDeploymentTests {
    static func services() async throws -> [String: [String: Any]] {
        let compose = try #require(
            try await DeploymentFilesTests.yamlDocuments()["docker-compose.yml"]?.first as? [String: Any])
        return try #require(compose["services"] as? [String: [String: Any]])
    }

    @Test("the gateway service publishes its port, probes itself with verify-worker healthcheck and names its keys")
    func gatewayService() async throws {
        let gateway = try #require(try await Self.services()["gateway"])
        #expect(gateway["command"] as? [String] == ["gateway"])
        #expect((gateway["ports"] as? [String])?.contains("8080:8080") == true)
        let test = try #require((gateway["healthcheck"] as? [String: Any])?["test"] as? [String])
        #expect(Array(test.prefix(3)) == ["CMD", "verify-worker", "healthcheck"])
        let environment = try #require(gateway["environment"] as? [String: Any])
        let known = Set(GatewayConfiguration.keys.map(\.environmentName))
        for key in environment.keys where key.hasPrefix("VERIFY_") {
            #expect(known.contains(key), "gateway: unknown key \(key)")
        }
        #expect(environment["VERIFY_BROKERS"] as? String == "kafka:9092")
        // Frontends authenticate: the tokens file the stack mounts is one the gateway accepts.
        #expect(environment["VERIFY_GATEWAY_AUTH"] == nil, "the compose gateway must not disable tokens")
        #expect(environment["VERIFY_GATEWAY_TOKENS_FILE"] as? String == "/run/secrets/gateway_tokens")
        let tokens = try BearerTokens.load(
            path: DeploymentFilesTests.root.appendingPathComponent("deploy/compose/gateway_tokens.txt").path)
        #expect(tokens.count >= 1)
    }

    @Test("the Kubernetes gateway reads its tokens from a Secret and names only gateway keys")
    func kubernetesGateway() async throws {
        let documents = try await DeploymentFilesTests.yamlDocuments()
        let deployment = try #require(
            documents["deploy/kubernetes/base/gateway.yaml"]?.compactMap { $0 as? [String: Any] }
                .first { $0["kind"] as? String == "Deployment" })
        let pod = try #require(
            ((deployment["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any])
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        let names = (container["env"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        let known = Set(GatewayConfiguration.keys.map(\.environmentName))
        for name in names { #expect(known.contains(name), "gateway.yaml: unknown key \(name)") }
        #expect(names.contains("VERIFY_GATEWAY_TOKENS_FILE"))
        #expect(!names.contains("VERIFY_GATEWAY_AUTH"))
        let secrets = (pod["volumes"] as? [[String: Any]] ?? []).compactMap {
            ($0["secret"] as? [String: Any])?["secretName"] as? String
        }
        #expect(secrets.contains("verify-gateway-tokens"))
    }

    @Test("every healthcheck that calls verify-worker uses a subcommand that parses")
    func healthchecksParse() async throws {
        let binary = try TestEnvironment.verifyWorkerBinary()
        for (name, service) in try await Self.services() {
            guard let test = (service["healthcheck"] as? [String: Any])?["test"] as? [String],
                test.count > 2, test[1] == "verify-worker"
            else { continue }
            // The built command runs the probe: a line that does not parse would end with a usage error (exit 64)
            // instead of the probe's one verdict line. Whether something answers on this machine does not matter.
            let arguments = Array(test.dropFirst(2))
            let url = try #require(arguments.firstIndex(of: "--url").map { arguments[$0 + 1] })
            let log = FileManager.default.temporaryDirectory.appendingPathComponent("healthcheck-\(UUID()).log")
            defer { try? FileManager.default.removeItem(at: log) }
            let process = try ChildProcess(
                executable: binary.path, arguments: arguments, logFile: log,
                exitsWithParent: true)
            let exit = await process.waitForExit(timeout: .seconds(30))
            let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            #expect(exit == .exited(0) || exit == .exited(1), "\(name): \(test) ended with \(String(describing: exit))")
            #expect(
                output.hasPrefix("healthy: \(url):") || output.hasPrefix("unhealthy: \(url):"), "\(name): \(output)")
        }
    }

    @Test("the load generator's exact command line parses as submit --generate seed-mix")
    func loadgenParses() async throws {
        let loadgen = try #require(try await Self.services()["loadgen"])
        let arguments = try #require(loadgen["command"] as? [String])
        #expect(arguments.first == "submit")
        let command = try SubmitArguments.parse(Array(arguments.dropFirst()))
        #expect(command.generate == "seed-mix")
        #expect(command.count == 100_000)
        #expect(command.rate == 500)
        #expect(command.simulator == "http://apple-sim:8443")
        #expect(command.catalogFile == "/etc/verify-worker/catalog.json")
        // The catalog the compose file mounts loads, and has what the generator needs.
        let data = try Data(contentsOf: DeploymentFilesTests.root.appendingPathComponent("deploy/compose/catalog.json"))
        let catalog = try Catalog.load(json: data)
        #expect(!catalog.bundleIDs.isEmpty)
        #expect(catalog.products.count == 4)
    }
}
