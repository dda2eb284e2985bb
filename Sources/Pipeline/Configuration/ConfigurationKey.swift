/// One configuration key of `verify-worker run`: its name in each source, its default and what it means.
///
/// Every key is settable from a flag (`--brokers`), an environment variable (`VERIFY_BROKERS`) and a file
/// (`VERIFY_BROKERS=…` lines, the same names as the environment, so a Kubernetes ConfigMap can feed either).
/// Secrets are the exception: they are read from files or the environment only, never from a flag, because
/// flags show up in `ps` and in process listings.
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

    public init(
        _ name: String, default defaultValue: String? = nil, required: Bool = false, secret: Bool = false,
        _ summary: String
    ) {
        self.name = name
        self.summary = summary
        self.defaultValue = defaultValue
        self.isRequired = required
        self.isSecret = secret
    }

    /// The environment variable and file key: `VERIFY_` and the upper-cased name.
    public var environmentName: String { "VERIFY_" + name.uppercased() }

    /// The command-line flag (`--group-id`); nil for secrets, which have none.
    public var flagName: String? { isSecret ? nil : "--" + name.replacingOccurrences(of: "_", with: "-") }
}
