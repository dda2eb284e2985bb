import Foundation

/// The keys of one long-running command, and everything generated from them: the Markdown reference, the
/// `--help` text and the flag parser. `verify-worker run`, `gateway` and `entitlements` each have one, so their
/// flags, environment variables and file lines follow the same rules.
public struct ConfigurationTable: Sendable {
    /// The command as typed, e.g. `verify-worker run`; used in help and error texts.
    public let command: String
    /// Every key, in the order `--help` and the reference show them.
    public let keys: [ConfigurationKey]

    public init(command: String, keys: [ConfigurationKey]) {
        self.command = command
        self.keys = keys
    }

    public func key(named name: String) -> ConfigurationKey? { keys.first { $0.name == name } }

    /// The name a file or environment entry is stored under: the key's name, or `<secret>_file` for the path of a
    /// secret's file. Nil for names that are not configuration.
    public func storageName(environmentName: String) -> String? {
        for key in keys {
            if key.environmentName == environmentName || key.aliasEnvironmentNames.contains(environmentName) {
                return key.name
            }
            if key.isSecret, key.environmentName + "_FILE" == environmentName { return key.name + "_file" }
        }
        return nil
    }

    /// The configuration reference as Markdown, under `heading` (`# Configuration reference` for a file of its own,
    /// a `##` heading for a section of one).
    public func referenceMarkdown(heading: String) -> String {
        var text = """
            \(heading)

            `\(command)` reads each key from, in increasing precedence: a file of `VERIFY_…=value` lines named by
            `VERIFY_CONFIG_FILE` or `--config-file`, the environment, and flags. Secrets have no flag and no plain line
            in that file: they come from `VERIFY_<KEY>` or, better, a file named by `VERIFY_<KEY>_FILE`. A bad value
            stops the command at start with one line naming the key. Generated from the code (`\(command) --help`
            shows the same).

            | key | environment / file | flag | default | meaning |
            | --- | --- | --- | --- | --- |

            """
        for key in keys {
            var environment =
                key.isSecret ? "`\(key.environmentName)`, `\(key.environmentName)_FILE`" : "`\(key.environmentName)`"
            for alias in key.aliasEnvironmentNames { environment += ", `\(alias)` (alias)" }
            let flag = key.flagName.map { "`\($0)`" } ?? "none (secret)"
            let defaultValue =
                key.isRequired ? "required" : key.defaultValue.map { $0.isEmpty ? "empty" : "`\($0)`" } ?? "none"
            let name = (["`\(key.name)`"] + key.aliases.map { "`\($0)` (alias)" }).joined(separator: ", ")
            text += "| \(name) | \(environment) | \(flag) | \(defaultValue) | \(key.summary) |\n"
        }
        return text
    }

    /// The flag list of `--help`: each key's flag, environment variable and default.
    public func flagsHelp() -> String {
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
            let environment = ([key.environmentName] + key.aliasEnvironmentNames).joined(separator: " or ")
            lines.append("      \(key.summary) [env: \(environment)] [default: \(defaultValue)]")
        }
        return lines.joined(separator: "\n")
    }

    /// Reads `--flag value` and `--flag=value` pairs into key names. Throws ``ConfigurationError`` for a flag that
    /// is not a key or that lacks its value.
    public func parseFlags(
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
                    let key = keys.first { $0.flagName == "--" + name }?.name
                    throw ConfigurationError(
                        key: key ?? name.replacingOccurrences(of: "-", with: "_"), problem: "needs a value")
                }
                value = arguments[index]
            }
            if name == "config-file" {
                configFile = value
            } else {
                guard let key = keys.first(where: { $0.flagName == "--" + name }) else {
                    // A secret's would-be flag is named as the secret it is, not as an unknown flag.
                    if let secret = self.key(named: name.replacingOccurrences(of: "-", with: "_")), secret.isSecret {
                        flags[secret.name] = value
                        index += 1
                        continue
                    }
                    throw ConfigurationError(key: "--\(name)", problem: "unknown flag (see \(command) --help)")
                }
                flags[key.name] = value
            }
            index += 1
        }
        return (flags, configFile)
    }

    /// The merged sources of a command line and an environment, in the documented precedence: the config file
    /// (`--config-file` or `VERIFY_CONFIG_FILE`), then the environment, then flags.
    public func loadSources(
        arguments: [String], environment: [String: String],
        readFile: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) -> ConfigurationSources {
        let (flags, configFileFlag) = try parseFlags(arguments)
        var sources = ConfigurationSources(table: self)
        if let path = configFileFlag ?? environment["VERIFY_CONFIG_FILE"] {
            let contents = try ConfigurationFile.read(path, key: "config_file", with: readFile)
            try sources.addFile(contents: contents, path: path)
        }
        sources.addEnvironment(environment)
        try sources.addFlags(flags)
        return sources
    }
}
