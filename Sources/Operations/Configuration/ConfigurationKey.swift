import Foundation

/// One configuration key of a long-running command (`run`, `gateway`, `entitlements`): its name in each source, its default
/// and what it means. A command's keys form its ``ConfigurationTable``.
///
/// Every key is settable from a flag (`--brokers`), an environment variable (`VERIFY_BROKERS`) and a file
/// (`VERIFY_BROKERS=…` lines, the same names as the environment, so a Kubernetes ConfigMap can feed either).
/// Secrets are the exception: their value is read from the environment or from the file named by
/// `VERIFY_<KEY>_FILE`, never from a flag (flags show up in `ps`) nor from a plain line of the configuration file
/// (that file is usually a ConfigMap, readable by more people than a secret).
public struct ConfigurationKey: Sendable, Hashable {
    /// The key's name in snake case, e.g. `group_id`.
    public let name: String
    /// What the value is and does, one sentence.
    public let summary: String
    /// The default as text (`nil`: no default; the key is optional or required, see ``isRequired``).
    public let defaultValue: String?
    /// A value must be given (no default makes sense).
    public let isRequired: Bool
    /// A secret (shared secret, key material): never from a flag, never printed.
    public let isSecret: Bool
    /// The flag's name when it is not the key's own (the gateway's `--port` for `gateway_port`, kept from before
    /// the gateway read this table).
    public let flag: String?
    /// Other spellings of the key that keep working (each its own `VERIFY_…` variable and file line, no flag): the
    /// gateway's `gateway_drain_timeout_s` beside every command's `drain_timeout_s`. Given in the same source as
    /// the key's own name, an alias wins: it is the command's own spelling, and a shared environment may set the
    /// other one for another command.
    public let aliases: [String]

    public init(
        _ name: String, default defaultValue: String? = nil, required: Bool = false, secret: Bool = false,
        flag: String? = nil, aliases: [String] = [], _ summary: String
    ) {
        self.name = name
        self.summary = summary
        self.defaultValue = defaultValue
        self.isRequired = required
        self.isSecret = secret
        self.flag = flag
        self.aliases = aliases
    }

    /// The environment variable and file key: `VERIFY_` and the upper-cased name.
    public var environmentName: String { "VERIFY_" + name.uppercased() }

    /// The variables and file keys of ``aliases``.
    public var aliasEnvironmentNames: [String] { aliases.map { "VERIFY_" + $0.uppercased() } }

    /// The command-line flag (`--group-id`); nil for secrets, which have none.
    public var flagName: String? {
        isSecret ? nil : "--" + (flag ?? name.replacingOccurrences(of: "_", with: "-"))
    }
}
