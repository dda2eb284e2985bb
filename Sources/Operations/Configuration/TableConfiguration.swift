import Foundation

/// A command's configuration read from its ``ConfigurationTable`` (the worker's, the reconciler's): the flag list of
/// its `--help` and the loading in the documented precedence, in one place.
public protocol TableConfiguration {
    static var table: ConfigurationTable { get }
    init(
        _ sources: ConfigurationSources, hostName: String, readFile: @escaping (String) throws -> String
    ) throws(ConfigurationError)
}

extension TableConfiguration {
    /// The flag list of the command's `--help`: each key's flag, environment variable and default.
    public static func flagsHelp() -> String { table.flagsHelp() }

    /// The configuration from a command line and an environment, in the documented precedence.
    public static func load(
        arguments: [String], environment: [String: String],
        readFile: @escaping (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) -> Self {
        let sources = try table.loadSources(arguments: arguments, environment: environment, readFile: readFile)
        return try Self(sources, hostName: ProcessInfo.processInfo.hostName, readFile: readFile)
    }
}
