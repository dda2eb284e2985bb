import Foundation
import Operations
import Testing
import Worker

@Suite("Worker configuration")
struct ConfigurationTests {
    func configuration(
        file: String? = nil, environment: [String: String] = [:], flags: [String: String] = [:],
        files: [String: String] = [:]
    ) throws -> WorkerConfiguration {
        var sources = ConfigurationSources()
        if let file { try sources.addFile(contents: file, path: "test.env") }
        sources.addEnvironment(["VERIFY_CATALOG_FILE": "catalog.json"].merging(environment) { $1 })
        try sources.addFlags(flags)
        return try WorkerConfiguration(sources, hostName: "host-1") { path in
            guard let text = files[path] else { throw MissingResource(what: path, hint: "") }
            return text
        }
    }

    func problem(
        file: String? = nil, environment: [String: String] = [:], flags: [String: String] = [:]
    ) -> ConfigurationError? {
        do {
            _ = try configuration(file: file, environment: environment, flags: flags)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            return ConfigurationError(key: "?", problem: "\(error)")
        }
    }

    @Test("defaults are documented and applied")
    func defaults() throws {
        let config = try configuration()
        #expect(config.brokers == "localhost:9092")
        #expect(config.groupID == "verify-workers")
        #expect(config.jobsTopic == "receipt-jobs")
        #expect(config.verdictsTopic == "receipt-verdicts")
        #expect(config.deadLetterTopic == "receipt-jobs-dlq")
        #expect(config.controlTopic == "receipt-control")
        #expect(config.workerID == "host-1")
        #expect(config.ledgerURL == "sqlite:verify-ledger.sqlite")
        #expect(config.maximumInFlight == 10_000)
        #expect(config.jobDeadline == .seconds(600))
        #expect(config.allowSandbox == false)
        #expect(config.sharedSecret == nil)
        #expect(config.verifyReceiptProductionURL == "https://buy.itunes.apple.com/verifyReceipt")
        // Under Kafka's broker default max.message.bytes (1,048,588), with room for a dead letter's headers.
        #expect(config.maximumProduceBytes == 1_000_000)
        #expect(config.deliveryTimeout == .seconds(120))
        for key in WorkerConfiguration.keys {
            #expect(!key.summary.isEmpty)
            #expect(
                key.isRequired || key.isSecret || key.defaultValue != nil || key.summary.contains("(default"),
                "\(key.name) has neither a default nor says why")
        }
    }

    @Test("flags override the environment, which overrides the file")
    func precedence() throws {
        let file = """
            # comment
            export VERIFY_BROKERS=file:1
            VERIFY_GROUP_ID="from-file"
            VERIFY_MAX_IN_FLIGHT=5
            """
        let config = try configuration(
            file: file, environment: ["VERIFY_BROKERS": "env:1", "VERIFY_MAX_IN_FLIGHT": "6"],
            flags: ["max_in_flight": "7"])
        #expect(config.brokers == "env:1")
        #expect(config.groupID == "from-file")
        #expect(config.maximumInFlight == 7)
    }

    @Test("max_produce_bytes and delivery_timeout_s are read and bounded")
    func produceLimits() throws {
        let config = try configuration(environment: [
            "VERIFY_MAX_PRODUCE_BYTES": "500000", "VERIFY_DELIVERY_TIMEOUT_S": "30",
        ])
        #expect(config.maximumProduceBytes == 500_000)
        #expect(config.deliveryTimeout == .seconds(30))
        // Too small for a verdict or a dead letter's headers.
        #expect(problem(environment: ["VERIFY_MAX_PRODUCE_BYTES": "1000"])?.key == "max_produce_bytes")
        #expect(problem(environment: ["VERIFY_DELIVERY_TIMEOUT_S": "0"])?.key == "delivery_timeout_s")
    }

    @Test("librdkafka properties pass through")
    func kafkaProperties() throws {
        let config = try configuration(environment: [
            "VERIFY_KAFKA_PROPERTIES": "security.protocol=SSL; ssl.ca.location=/etc/ca.pem"
        ])
        #expect(config.kafkaProperties == ["security.protocol": "SSL", "ssl.ca.location": "/etc/ca.pem"])
    }

    @Test(
        "a bad value fails with one line naming the key",
        arguments: [
            (["VERIFY_MAX_IN_FLIGHT": "lots"], "max_in_flight"),
            (["VERIFY_MAX_IN_FLIGHT": "0"], "max_in_flight"),
            (["VERIFY_ALLOW_SANDBOX": "maybe"], "allow_sandbox"),
            (["VERIFY_LEDGER_URL": "mysql://x"], "ledger_url"),
            (["VERIFY_VERIFY_RECEIPT_PRODUCTION_URL": "ftp://apple"], "verify_receipt_production_url"),
            (["VERIFY_LOG_LEVEL": "loud"], "log_level"),
            (["VERIFY_CATALOG_FILE": ""], "catalog_file"),
            (["VERIFY_APPLE_MIN_CONCURRENCY": "10", "VERIFY_APPLE_MAX_CONCURRENCY": "5"], "apple_min_concurrency"),
            (["VERIFY_KAFKA_PROPERTIES": "novalue"], "kafka_properties"),
            (["VERIFY_SERVER_API_KEY": "pem"], "server_api_key_id"),
            (["VERIFY_APPLE_APP_APPLE_ID": "my-app"], "apple_app_apple_id"),
            (["VERIFY_APPLE_APP_APPLE_ID": "-5"], "apple_app_apple_id"),
        ] as [([String: String], String)])
    func badValues(environment: [String: String], key: String) {
        let error = problem(environment: environment)
        #expect(error?.key == key, "\(String(describing: error))")
        #expect(error.map { !$0.description.contains("\n") } ?? false)
    }

    @Test("apple_app_apple_id: unset checks nothing; set, it is the number the rules compare notifications with")
    func appAppleID() throws {
        #expect(try configuration().appleAppAppleID == nil)
        #expect(
            try configuration(environment: ["VERIFY_APPLE_APP_APPLE_ID": "1234567890"]).appleAppAppleID == 1_234_567_890
        )
    }

    @Test(
        "an http:// Apple URL to a host that is not loopback is refused unless explicitly allowed",
        arguments: [
            ("VERIFY_VERIFY_RECEIPT_PRODUCTION_URL", "verify_receipt_production_url", "/verifyReceipt"),
            ("VERIFY_VERIFY_RECEIPT_SANDBOX_URL", "verify_receipt_sandbox_url", "/verifyReceipt"),
            ("VERIFY_SERVER_API_PRODUCTION_URL", "server_api_production_url", ""),
            ("VERIFY_SERVER_API_SANDBOX_URL", "server_api_sandbox_url", "/sandbox"),
        ])
    func plainHTTPAppleURLs(variable: String, key: String, path: String) throws {
        for host in ["buy.itunes.apple.com", "apple-sim:8443", "10.0.0.7", "127.0.0.1.example.com"] {
            let error = problem(environment: [variable: "http://\(host)\(path)"])
            #expect(error?.key == key, "http://\(host): \(String(describing: error))")
            #expect(error?.problem.contains("allow_http_apple_urls") == true)
            // The refusal names what that URL would expose: verifyReceipt carries the shared secret, the Server API
            // a token signed with its key.
            let serverAPI = key.hasPrefix("server_api")
            #expect(error?.problem.contains("shared secret") == !serverAPI, "\(String(describing: error))")
            #expect(error?.problem.contains("server_api_key") == serverAPI, "\(String(describing: error))")
        }
        for safe in ["https://buy.itunes.apple.com", "http://127.0.0.1:8443", "http://localhost:1", "http://[::1]:9"] {
            #expect(problem(environment: [variable: safe + path]) == nil, "\(safe) was refused")
        }
        let allowed = try configuration(environment: [
            variable: "http://apple-sim:8443\(path)", "VERIFY_ALLOW_HTTP_APPLE_URLS": "true",
        ])
        #expect(allowed.allowHTTPAppleURLs)
    }

    @Test("the consumption lookup: unset by default; each setting wrong in turn is one line naming its key")
    func consumptionLookup() throws {
        let unset = try configuration()
        #expect(unset.consumptionLookupURL == nil && unset.consumptionLookupToken == nil)
        #expect(unset.consumptionLookupTimeout == .milliseconds(2000))
        let url = "https://backend.example.com/usage"
        let set = try configuration(
            environment: [
                "VERIFY_CONSUMPTION_LOOKUP_URL": url, "VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE": "/run/token",
                "VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS": "60000",
            ],
            files: ["/run/token": "s3cret-token\n"])
        #expect(set.consumptionLookupURL == url)
        #expect(set.consumptionLookupToken?.value == "s3cret-token")
        #expect("\(set.consumptionLookupToken!)" == "<redacted>")
        #expect(set.consumptionLookupTimeout == .milliseconds(60_000))
        #expect(
            try configuration(environment: ["VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS": "1"]).consumptionLookupTimeout
                == .milliseconds(1))
        for safe in ["http://127.0.0.1:8080/usage", "http://localhost/usage?tenant=a", "http://[::1]:9/u"] {
            #expect(
                try configuration(environment: ["VERIFY_CONSUMPTION_LOOKUP_URL": safe]).consumptionLookupURL == safe)
        }
        func refusal(_ environment: [String: String], files: [String: String] = [:]) -> ConfigurationError? {
            do {
                _ = try configuration(environment: environment, files: files)
                return nil
            } catch {
                return error as? ConfigurationError
            }
        }
        for (environment, key, problem) in [
            (
                ["VERIFY_CONSUMPTION_LOOKUP_URL": "ftp://backend/usage"], "consumption_lookup_url",
                "expected an http(s) URL"
            ),
            (["VERIFY_CONSUMPTION_LOOKUP_URL": "backend/usage"], "consumption_lookup_url", "expected an http(s) URL"),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_URL": "http://backend.internal/usage"], "consumption_lookup_url",
                "must be https://, or http:// to a loopback host (a local backend)"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE": "/run/token"], "consumption_lookup_token_file",
                "needs consumption_lookup_url"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_URL": url, "VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE": "/missing"],
                "consumption_lookup_token_file", "cannot read the file"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_URL": url, "VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE": "/run/empty"],
                "consumption_lookup_token_file", "file is empty"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_URL": url, "VERIFY_CONSUMPTION_LOOKUP_TOKEN_FILE": "/run/two-lines"],
                "consumption_lookup_token_file", "the token must be one line without control characters"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS": "0"], "consumption_lookup_timeout_ms",
                "expected a whole number from 1 to 60000"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS": "60001"], "consumption_lookup_timeout_ms",
                "expected a whole number from 1 to 60000"
            ),
            (
                ["VERIFY_CONSUMPTION_LOOKUP_TIMEOUT_MS": "2s"], "consumption_lookup_timeout_ms",
                "expected a whole number from 1 to 60000"
            ),
        ] as [([String: String], String, String)] {
            let error = refusal(environment, files: ["/run/token": "t", "/run/empty": "\n", "/run/two-lines": "a\nb"])
            #expect(error?.key == key, "\(environment): \(String(describing: error))")
            #expect(error?.problem == problem, "\(environment): \(String(describing: error))")
            #expect(error.map { !$0.description.contains("\n") } ?? false)
            #expect(error.map { !$0.description.contains("a\nb") && !$0.description.contains("s3cret") } ?? false)
        }
    }

    @Test("unknown keys in a file are an error, not a silent default")
    func unknownFileKey() {
        #expect(problem(file: "VERIFY_BROKER=typo:1")?.key == "VERIFY_BROKER")
        #expect(problem(file: "no equals sign")?.key == "test.env:1")
    }

    @Test("secrets come from the environment or a file, never a flag, and never print")
    func secrets() throws {
        #expect(problem(flags: ["shared_secret": "s3cret"])?.key == "shared_secret")
        let fromEnvironment = try configuration(environment: ["VERIFY_SHARED_SECRET": "s3cret"])
        #expect(fromEnvironment.sharedSecret?.value == "s3cret")
        let fromFile = try configuration(
            environment: ["VERIFY_SHARED_SECRET_FILE": "/run/secrets/shared"],
            files: ["/run/secrets/shared": "s3cret\n"])
        #expect(fromFile.sharedSecret?.value == "s3cret")
        #expect("\(fromFile.sharedSecret!)" == "<redacted>")
        #expect(!String(reflecting: fromFile.sharedSecret!).contains("s3cret"))
        let missing = problem(environment: ["VERIFY_SHARED_SECRET_FILE": "/nope"])
        #expect(missing?.key == "shared_secret_file")
        let viaConfigFile = try configuration(
            file: "VERIFY_SERVER_API_KEY_FILE=/keys/k.p8\nVERIFY_SERVER_API_KEY_ID=K\nVERIFY_SERVER_API_ISSUER_ID=I",
            files: ["/keys/k.p8": "-----BEGIN PRIVATE KEY-----"])
        #expect(viaConfigFile.serverAPIKey?.value == "-----BEGIN PRIVATE KEY-----")
    }

    @Test("a secret's value in the config file is refused with one line naming the key; a _FILE line is fine")
    func secretValueInConfigFile() throws {
        for (line, key) in [
            ("VERIFY_SHARED_SECRET=s3cret", "shared_secret"),
            ("export VERIFY_SERVER_API_KEY='s3cret'", "server_api_key"),
        ] {
            let error = problem(file: "VERIFY_GROUP_ID=g\n" + line)
            #expect(error?.key == key, "\(String(describing: error))")
            #expect(error.map { !$0.description.contains("s3cret") && !$0.description.contains("\n") } ?? false)
            #expect(error?.problem.contains("test.env:2") == true)
        }
        let viaFileLine = try configuration(
            file: "VERIFY_SHARED_SECRET_FILE=/run/secrets/shared", files: ["/run/secrets/shared": "s3cret\n"])
        #expect(viaFileLine.sharedSecret?.value == "s3cret")
    }

    @Test("every key has an environment name, and a flag unless it is a secret")
    func names() {
        let key = WorkerConfiguration.key(named: "group_id")
        #expect(key?.environmentName == "VERIFY_GROUP_ID")
        #expect(key?.flagName == "--group-id")
        #expect(WorkerConfiguration.key(named: "shared_secret")?.flagName == nil)
        #expect(Set(WorkerConfiguration.keys.map(\.name)).count == WorkerConfiguration.keys.count)
    }
}

@Suite("Configuration reference")
struct ConfigurationReferenceTests {
    @Test("docs/CONFIGURATION.md is the reference generated from the key table")
    func referenceIsCurrent() throws {
        let url = TestEnvironment.packageRoot.appendingPathComponent("docs/CONFIGURATION.md")
        let onDisk = try String(contentsOf: url, encoding: .utf8)
        let generated = WorkerConfiguration.referenceMarkdown()
        #expect(
            onDisk.hasPrefix(generated),
            "docs/CONFIGURATION.md is out of date: regenerate it with `verify-worker config-reference`")
    }
}

@Suite("Worker command line")
struct WorkerCommandLineTests {
    static let environment = ["VERIFY_CATALOG_FILE": "/etc/catalog.json", "VERIFY_GROUP_ID": "from-env"]

    @Test("--name value and --name=value both work, flags win over the environment, a file comes first")
    func flags() throws {
        let files = ["/etc/worker.env": "VERIFY_GROUP_ID=from-file\nVERIFY_JOBS_TOPIC=file-jobs\n"]
        let configuration = try WorkerConfiguration.load(
            arguments: ["--group-id", "from-flag", "--max-in-flight=77", "--config-file", "/etc/worker.env"],
            environment: Self.environment,
            readFile: { path in
                guard let text = files[path] else { throw CocoaError(.fileNoSuchFile) }
                return text
            })
        #expect(configuration.groupID == "from-flag")
        #expect(configuration.maximumInFlight == 77)
        #expect(configuration.jobsTopic == "file-jobs")
        #expect(configuration.catalogFile == "/etc/catalog.json")
    }

    @Test(
        "a bad command line is one error naming the key",
        arguments: [
            (["--bogus", "1"], "--bogus"), (["--group-id"], "group_id"), (["stray"], "stray"),
            (["--shared-secret", "s3cret"], "shared_secret"), (["--max-in-flight", "many"], "max_in_flight"),
        ])
    func badCommandLine(arguments: [String], key: String) {
        #expect {
            _ = try WorkerConfiguration.load(arguments: arguments, environment: Self.environment)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.key == key && !error.description.contains("s3cret")
        }
    }

    @Test("the help text lists every key with its environment name and default")
    func help() {
        let help = WorkerConfiguration.flagsHelp()
        for key in WorkerConfiguration.keys {
            #expect(help.contains(key.environmentName), "\(key.name)")
            if let flag = key.flagName { #expect(help.contains(flag + " <value>"), "\(flag)") }
        }
    }
}
