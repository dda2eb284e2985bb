import Foundation
import Operations
import Testing
import Traffic
import Worker

/// Docker does not run on the build machines, so these checks read the deployment files instead: they parse,
/// they name only configuration keys the worker understands, and the image ships exactly the libraries the
/// binary links.
@Suite("Deployment files", .timeLimit(.minutes(2)))
struct DeploymentFilesTests {
    static let root = TestEnvironment.packageRoot

    /// Every YAML file of the project, parsed by PyYAML, as JSON values.
    static func yamlDocuments() async throws -> [String: [Any]] {
        let enumerator = FileManager.default.enumerator(atPath: root.appendingPathComponent("deploy").path)
        var files = ["docker-compose.yml"]
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix(".yaml") || path.hasSuffix(".yml") { files.append("deploy/" + path) }
        }
        let output = try await run(["python3", root.appendingPathComponent("scripts/yaml-to-json.py").path] + files)
        var documents: [String: [Any]] = [:]
        for line in output.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            documents[object["file"] as! String] = object["documents"] as? [Any] ?? []
        }
        #expect(documents.count == files.count)
        return documents
    }

    /// Runs a command in the package's root; throws with its stderr if it fails.
    static func run(_ arguments: [String]) async throws -> String {
        let done = try await TestCommand.run(arguments, in: root)
        guard done.succeeded else {
            throw MissingResource(
                what: "\(arguments.prefix(2).joined(separator: " ")) failed: \(done.errors)", hint: "")
        }
        return done.output
    }

    @Test("every YAML file parses")
    func yamlParses() async throws {
        let documents = try await Self.yamlDocuments()
        #expect(documents.keys.contains("docker-compose.yml"))
        #expect(documents.keys.contains("deploy/kubernetes/base/deployment.yaml"))
    }

    @Test("docker-compose has the whole stack, with health checks and a complete worker environment")
    func compose() async throws {
        let compose = try #require(try await Self.yamlDocuments()["docker-compose.yml"]?.first as? [String: Any])
        let services = try #require(compose["services"] as? [String: [String: Any]])
        for name in ["kafka", "kafka-init", "postgres", "apple-sim", "worker", "loadgen", "prometheus", "grafana"] {
            #expect(services[name] != nil, "service \(name) missing")
        }
        for name in ["kafka", "postgres", "apple-sim", "worker", "prometheus", "grafana"] {
            #expect(services[name]?["healthcheck"] != nil, "service \(name) has no healthcheck")
        }
        let worker = try #require(services["worker"])
        #expect((worker["deploy"] as? [String: Any])?["replicas"] as? Int == 3)
        let environment = try #require(worker["environment"] as? [String: Any])
        try checkKeys(environment.keys, in: "docker-compose.yml worker")
        for required in WorkerConfiguration.keys where required.isRequired {
            #expect(environment[required.environmentName] != nil, "worker lacks \(required.environmentName)")
        }
        #expect(environment["VERIFY_SHARED_SECRET"] == nil, "secrets come from files, not plain environment")
        try configurationLoads(environment.mapValues { "\($0)" }, in: "docker-compose.yml")
    }

    @Test("Kubernetes manifests use only keys the worker understands, and the probes and grace period fit")
    func kubernetes() async throws {
        let documents = try await Self.yamlDocuments()
        let configMap = try #require(documents["deploy/kubernetes/base/configmap.yaml"]?.first as? [String: Any])
        let data = try #require(configMap["data"] as? [String: Any])
        try checkKeys(data.keys, in: "configmap.yaml")
        try configurationLoads(data.mapValues { "\($0)" }, in: "configmap.yaml")

        let deployment = try #require(documents["deploy/kubernetes/base/deployment.yaml"]?.first as? [String: Any])
        let pod = try #require(
            ((deployment["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any])
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        let liveness = (container["livenessProbe"] as? [String: Any])?["httpGet"] as? [String: Any]
        let readiness = (container["readinessProbe"] as? [String: Any])?["httpGet"] as? [String: Any]
        #expect(liveness?["path"] as? String == "/healthz")
        #expect(readiness?["path"] as? String == "/readyz")
        let grace = try #require(pod["terminationGracePeriodSeconds"] as? Int)
        let drain = Int("\(data["VERIFY_DRAIN_TIMEOUT_S"] ?? "25")") ?? 25
        #expect(grace > drain, "the grace period must cover the drain deadline")
        for env in container["env"] as? [[String: Any]] ?? [] {
            try checkKeys([env["name"] as? String ?? ""], in: "deployment.yaml env")
        }
        #expect(container["resources"] != nil)
        for kind in ["poddisruptionbudget.yaml", "scaledobject.yaml", "servicemonitor.yaml"] {
            #expect(documents["deploy/kubernetes/base/\(kind)"] != nil)
        }
    }

    func checkKeys(_ keys: some Sequence<String>, in file: String) throws {
        for key in keys where key.hasPrefix("VERIFY_") {
            #expect(WorkerConfiguration.storageName(environmentName: key) != nil, "\(file): unknown key \(key)")
        }
    }

    /// The values must also be valid, not just the names: build the configuration from them.
    func configurationLoads(_ environment: [String: String], in file: String) throws {
        var sources = ConfigurationSources()
        sources.addEnvironment(environment)
        do {
            _ = try WorkerConfiguration(sources, hostName: "test") { _ in "secret" }
        } catch {
            Issue.record("\(file): \(error)")
        }
    }

    /// The Debian package that installed a library. With merged /usr, dpkg records either the /lib or the
    /// /usr/lib form of a path, and either the symlink or its target, so all four are tried.
    static func debianPackage(owning path: String) async throws -> String {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var candidates: [String] = []
        for form in [path, real] {
            candidates.append(form)
            if form.hasPrefix("/usr/lib/") { candidates.append(String(form.dropFirst(4))) }
            if form.hasPrefix("/lib/") { candidates.append("/usr" + form) }
        }
        for candidate in candidates {
            if let output = try? await run(["dpkg", "-S", candidate]), let owner = output.split(separator: ":").first {
                return String(owner)
            }
        }
        throw MissingResource(what: "the Debian package of \(path)", hint: "dpkg -S found none")
    }

    /// The toolchain's shared runtime libraries (`…/usr/lib/swift/linux`), found from `swift` on PATH.
    static func swiftRuntimeDirectory() async -> String {
        let swift =
            (try? await run(["which", "swift"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "/usr/bin/swift"
        let resolved = URL(fileURLWithPath: swift).resolvingSymlinksInPath()
        return resolved.deletingLastPathComponent().deletingLastPathComponent().path + "/lib/swift/linux"
    }

    @Test("the image's runtime stage installs exactly the libraries the binary links")
    func dockerfileLibraries() async throws {
        let dockerfile = try String(contentsOf: Self.root.appendingPathComponent("Dockerfile"), encoding: .utf8)
        let runtime = try #require(dockerfile.components(separatedBy: "AS runtime").last)
        let installLine = try #require(runtime.split(separator: "\n").first { $0.contains("apt-get install") })
        let installed = Set(
            installLine.split(separator: " ").map(String.init).filter {
                !$0.hasPrefix("-") && !["apt-get", "install", "&&", "\\"].contains($0)
            })

        // The direct dependencies of the binary (NEEDED entries), resolved to paths by ldd, then to Debian packages.
        let binary = try TestEnvironment.verifyWorkerBinary().path
        let needed = try await Self.run(["readelf", "-d", binary]).split(separator: "\n").compactMap {
            line -> String? in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]")
            else { return nil }
            return String(line[line.index(after: open)..<close])
        }
        let paths = try await Self.run(["ldd", binary]).split(separator: "\n").reduce(into: [String: String]()) {
            map, line in
            let parts = line.split(separator: " ")
            if parts.count >= 3, parts[1] == "=>" {
                map[parts[0].trimmingCharacters(in: .whitespaces)] = String(parts[2])
            }
        }
        var packages = Set<String>()
        let swiftRuntime = await Self.swiftRuntimeDirectory()
        for library in needed {
            // The Swift runtime and Foundation are linked statically into the image (--static-swift-stdlib).
            if FileManager.default.fileExists(atPath: swiftRuntime + "/" + library) { continue }
            if library.hasPrefix("ld-linux") { continue }  // the dynamic loader, part of libc6
            let path = try #require(paths[library], "ldd does not resolve \(library)")
            let owner = try await Self.debianPackage(owning: path)
            // The C and C++ runtimes are part of every Debian base image.
            if ["libc6", "libgcc-s1", "libstdc++6"].contains(owner) { continue }
            packages.insert(owner)
        }
        #expect(packages == installed.subtracting(["ca-certificates"]), "linked: \(packages), installed: \(installed)")
        #expect(runtime.contains("USER 10001"))
        #expect(runtime.contains("HEALTHCHECK"))
    }
}
