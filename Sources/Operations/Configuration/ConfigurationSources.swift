import Foundation

/// The raw text values of the configuration, merged from its sources in increasing precedence: the file named by
/// `VERIFY_CONFIG_FILE` (or `--config-file`), then the environment, then flags.
public struct ConfigurationSources: Sendable {
    /// The command's keys: which names are configuration, which are secrets, and their defaults.
    public let table: ConfigurationTable
    /// Text values by key name.
    public private(set) var values: [String: String] = [:]
    /// Where each value came from, for error messages (`flag --brokers`, `VERIFY_BROKERS`, `file x.env:3`).
    public private(set) var origins: [String: String] = [:]
    /// The spelling each value was given under when it is an alias (``ConfigurationKey/aliases``), for error messages.
    public private(set) var aliasesGiven: [String: String] = [:]
    /// The source that set each value (file 0, environment 1, flags 2) and whether under an alias.
    private var setBy: [String: (source: Int, alias: Bool)] = [:]

    public init(table: ConfigurationTable) {
        self.table = table
    }

    /// Reads `KEY=VALUE` lines (`#` comments, blank lines, optional `export `, optional quotes). Unknown keys are
    /// an error: a typo in a file must not silently fall back to a default. A secret's value is an error too (its
    /// `_FILE` line, naming a file, is fine): the file is configuration, often a ConfigMap, not a secret store.
    public mutating func addFile(contents: String, path: String) throws(ConfigurationError) {
        for (index, rawLine) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line.removeFirst("export ".count) }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError(key: "\(path):\(index + 1)", problem: "expected KEY=VALUE")
            }
            let name = String(line[..<equals]).trimmingCharacters(in: .whitespaces)
            var value = String(line[line.index(after: equals)...]).trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            guard let storageName = table.storageName(environmentName: name) else {
                throw ConfigurationError(key: name, problem: "unknown key in \(path):\(index + 1)")
            }
            if let key = table.key(named: storageName), key.isSecret {
                throw ConfigurationError(
                    key: key.name,
                    problem: "is a secret: not accepted in \(path):\(index + 1); set \(key.environmentName) in the "
                        + "environment or name a file with \(key.environmentName)_FILE")
            }
            let alias = table.key(named: storageName).flatMap { key in
                zip(key.aliases, key.aliasEnvironmentNames).first { $0.1 == name }?.0
            }
            set(storageName, value, origin: "\(path):\(index + 1)", source: 0, alias: alias)
        }
    }

    /// Takes every `VERIFY_*` variable that names a key (and `VERIFY_<SECRET>_FILE` for secrets). Other
    /// variables are ignored: tests and tools use some `VERIFY_*` names of their own.
    public mutating func addEnvironment(_ environment: [String: String]) {
        for key in table.keys {
            if let value = environment[key.environmentName] {
                set(key.name, value, origin: key.environmentName, source: 1)
            }
            for (alias, variable) in zip(key.aliases, key.aliasEnvironmentNames) {
                if let value = environment[variable] { set(key.name, value, origin: variable, source: 1, alias: alias) }
            }
            if key.isSecret, let path = environment[key.environmentName + "_FILE"] {
                set(key.name + "_file", path, origin: key.environmentName + "_FILE", source: 1)
            }
        }
    }

    /// Takes flag values by key name (the command's parser already matched `--flag-name` to a key).
    public mutating func addFlags(_ flags: [String: String]) throws(ConfigurationError) {
        for (name, value) in flags {
            guard let key = table.key(named: name) else {
                throw ConfigurationError(key: name, problem: "unknown flag")
            }
            guard !key.isSecret else {
                throw ConfigurationError(
                    key: key.name, problem: "is a secret: set \(key.environmentName) or its _FILE variant, not a flag")
            }
            set(name, value, origin: key.flagName ?? name, source: 2)
        }
    }

    /// A later source wins; within one source an alias wins over the key's own name (see
    /// ``ConfigurationKey/aliases``), else the later line.
    mutating func set(_ name: String, _ value: String, origin: String, source: Int, alias: String? = nil) {
        if let previous = setBy[name], previous.source == source, previous.alias, alias == nil { return }
        values[name] = value
        origins[name] = origin
        setBy[name] = (source, alias != nil)
        aliasesGiven[name] = alias
    }
}

/// A configuration that cannot start the command: one line naming the key and the problem (never the value of a
/// secret).
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var key: String
    public var problem: String

    public init(key: String, problem: String) {
        self.key = key
        self.problem = problem
    }

    public var description: String { "configuration: \(key): \(problem)" }
}
