import Entitlements
import Foundation
import Messages
import Observability
import Operations
import Testing

/// The entitlement service ships with the rest: compose runs it with a health check and a valid configuration,
/// Kubernetes has its Deployment with probes, Prometheus scrapes it and Grafana shows it.
@Suite("Deployment files: entitlement service", .timeLimit(.minutes(2)))
struct EntitlementDeploymentTests {
    static let table = EntitlementsConfiguration.table

    /// The configuration the environment names loads (files read as: catalog → the compose catalog, else a token).
    static func loads(_ environment: [String: String], in file: String) {
        for key in environment.keys where key.hasPrefix("VERIFY_") {
            #expect(table.storageName(environmentName: key) != nil, "\(file): unknown key \(key)")
        }
        do {
            var sources = ConfigurationSources(table: table)
            sources.addEnvironment(environment)
            let configuration = try EntitlementsConfiguration(sources)
            let catalog = try Data(
                contentsOf: TestEnvironment.packageRoot.appendingPathComponent("deploy/compose/catalog.json"))
            _ = try Catalog.load(json: catalog, for: .entitlements)
            #expect(configuration.port == 8090)
        } catch {
            Issue.record("\(file): \(error)")
        }
    }

    @Test("compose: the service, its port, health check, tokens secret, topic, and a configuration that loads")
    func compose() async throws {
        let compose = try #require(
            try await DeploymentFilesTests.yamlDocuments()["docker-compose.yml"]?.first as? [String: Any])
        let services = try #require(compose["services"] as? [String: [String: Any]])
        let service = try #require(services["entitlements"])
        #expect(service["command"] as? [String] == ["entitlements"])
        #expect((service["ports"] as? [String])?.contains("8090:8090") == true)
        let test = try #require((service["healthcheck"] as? [String: Any])?["test"] as? [String])
        #expect(test.last == "http://127.0.0.1:8090/readyz")
        #expect((service["secrets"] as? [String]) == ["entitlement_tokens"])
        let environment = try #require(service["environment"] as? [String: Any]).mapValues { "\($0)" }
        #expect(environment["VERIFY_ENTITLEMENTS_STORE_URL"]?.hasPrefix("postgres://") == true)
        Self.loads(environment, in: "docker-compose.yml entitlements")
        let tokens = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("deploy/compose/entitlement_tokens.txt"),
            encoding: .utf8)
        #expect(try AccessTokens(contents: tokens).count == 1)
        let initScript = "\((services["kafka-init"]?["command"] as? [String])?.joined() ?? "")"
        #expect(initScript.contains("--topic entitlement-events"))
    }

    @Test("Kubernetes: a Deployment with liveness, readiness and startup probes on :8090, keys the service knows")
    func kubernetes() async throws {
        let documents = try await DeploymentFilesTests.yamlDocuments()
        let manifests = try #require(documents["deploy/kubernetes/base/entitlements.yaml"] as? [[String: Any]])
        let deployment = try #require(manifests.first { $0["kind"] as? String == "Deployment" })
        let pod = try #require(
            ((deployment["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any])
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        #expect(container["args"] as? [String] == ["entitlements"])
        for (probe, path) in [
            ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz"),
        ] {
            let get = (container[probe] as? [String: Any])?["httpGet"] as? [String: Any]
            #expect(get?["path"] as? String == path, "\(probe)")
        }
        let env = try #require(container["env"] as? [[String: Any]])
        for entry in env {
            let name = entry["name"] as? String ?? ""
            #expect(Self.table.storageName(environmentName: name) != nil, "entitlements.yaml: unknown key \(name)")
        }
        #expect(env.contains { $0["name"] as? String == "VERIFY_ENTITLEMENTS_TOKENS_FILE" })
        #expect(manifests.contains { $0["kind"] as? String == "Service" })
        let kustomization = try #require(
            documents["deploy/kubernetes/base/kustomization.yaml"]?.first as? [String: Any])
        #expect((kustomization["resources"] as? [String])?.contains("entitlements.yaml") == true)
    }

    @Test("Prometheus scrapes it and the Grafana dashboard has its panels")
    func monitoring() async throws {
        let prometheus = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("deploy/prometheus/prometheus.yml"),
            encoding: .utf8)
        #expect(prometheus.contains("job_name: verify-entitlements"))
        let dashboard = try #require(
            try JSONSerialization.jsonObject(
                with: Data(
                    contentsOf: TestEnvironment.packageRoot.appendingPathComponent(
                        "deploy/grafana/dashboards/verify-worker.json"))) as? [String: Any])
        let expressions = (dashboard["panels"] as? [[String: Any]] ?? []).flatMap { panel in
            (panel["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String }
        }
        for metric in [
            MetricNames.entitlementsVerdicts, MetricNames.entitlementsLag, MetricNames.entitlementsRequestDuration,
        ] {
            #expect(expressions.contains { $0.contains(metric) }, "\(metric)")
        }
    }
}
