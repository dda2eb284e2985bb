import Foundation

extension WorkerConfiguration {
    /// The configuration reference as Markdown: the text of `docs/CONFIGURATION.md`, generated from ``keys`` so the
    /// two cannot drift apart (a test compares them).
    public static func referenceMarkdown() -> String {
        var text = """
            # Configuration reference

            `verify-worker run` reads each key from, in increasing precedence: a file of `VERIFY_…=value` lines named by
            `VERIFY_CONFIG_FILE` or `--config-file`, the environment, and flags. Secrets have no flag: they come from
            `VERIFY_<KEY>` or, better, a file named by `VERIFY_<KEY>_FILE`. A bad value stops the worker at start with
            one line naming the key. This file is generated from the code (`verify-worker run --help` shows the same).

            | key | environment / file | flag | default | meaning |
            | --- | --- | --- | --- | --- |

            """
        for key in keys {
            let environment =
                key.isSecret ? "`\(key.environmentName)`, `\(key.environmentName)_FILE`" : "`\(key.environmentName)`"
            let flag = key.flagName.map { "`\($0)`" } ?? "none (secret)"
            let defaultValue =
                key.isRequired ? "required" : key.defaultValue.map { $0.isEmpty ? "empty" : "`\($0)`" } ?? "none"
            text += "| `\(key.name)` | \(environment) | \(flag) | \(defaultValue) | \(key.summary) |\n"
        }
        return text
    }
}

extension WorkerConfiguration {
    /// The flag list of `verify-worker run --help`: each key's flag, environment variable and default.
    public static func flagsHelp() -> String {
        var lines = [
            "Every key is a flag, a VERIFY_ environment variable, or a line of the file named by --config-file",
            "(VERIFY_CONFIG_FILE); flags win over the environment, the environment over the file.",
            "",
        ]
        for key in keys {
            let flag = key.flagName ?? "(secret: \(key.environmentName) or \(key.environmentName)_FILE)"
            let defaultValue =
                key.isRequired ? "required" : key.defaultValue.map { $0.isEmpty ? "empty" : $0 } ?? "none"
            lines.append("  \(flag) <value>")
            lines.append("      \(key.summary) [env: \(key.environmentName)] [default: \(defaultValue)]")
        }
        return lines.joined(separator: "\n")
    }

    /// Reads `--flag value` and `--flag=value` pairs into key names. Throws ``ConfigurationError`` for a flag that
    /// is not a key or that lacks its value.
    public static func parseFlags(
        _ arguments: [String]
    ) throws(ConfigurationError) -> (
        flags: [String: String], configFile: String?
    ) {
        var flags: [String: String] = [:]
        var configFile: String?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else {
                throw ConfigurationError(key: argument, problem: "unexpected argument (flags are --name value)")
            }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if value == nil {
                index += 1
                guard index < arguments.count else {
                    throw ConfigurationError(
                        key: name.replacingOccurrences(of: "-", with: "_"), problem: "needs a value")
                }
                value = arguments[index]
            }
            let keyName = name.replacingOccurrences(of: "-", with: "_")
            if keyName == "config_file" {
                configFile = value
            } else {
                guard let key = self.key(named: keyName) else {
                    throw ConfigurationError(key: "--\(name)", problem: "unknown flag (see verify-worker run --help)")
                }
                flags[key.name] = value
            }
            index += 1
        }
        return (flags, configFile)
    }

    /// The configuration from a command line and an environment, in the documented precedence.
    public static func load(
        arguments: [String], environment: [String: String],
        readFile: @escaping (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) -> WorkerConfiguration {
        let (flags, configFileFlag) = try parseFlags(arguments)
        var sources = ConfigurationSources()
        if let path = configFileFlag ?? environment["VERIFY_CONFIG_FILE"] {
            let contents: String
            do {
                contents = try readFile(path)
            } catch {
                throw ConfigurationError(key: "config_file", problem: "cannot read \(path)")
            }
            try sources.addFile(contents: contents, path: path)
        }
        sources.addEnvironment(environment)
        try sources.addFlags(flags)
        return try WorkerConfiguration(sources, readFile: readFile)
    }
}
