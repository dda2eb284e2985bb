import ArgumentParser
import Foundation
import Logging
import Operations

/// A long-running command whose flags all go to its configuration reader (`run`, `reconcile`, `gateway`,
/// `entitlements`): the parser sees them only as `options`, so `--help` is answered here before the command starts.
protocol ConfiguredCommand: AsyncParsableCommand {
    var options: [String] { get }
    /// The command itself, once a request for help is answered.
    func start() async throws
}

extension ConfiguredCommand {
    func run() async throws {
        if options.contains("--help") || options.contains("-h") {
            print(Self.helpMessage())
            return
        }
        try await start()
    }

    /// The command's configuration from its flags and the environment; a bad setting ends the command (exit 2).
    func load<Configuration: TableConfiguration>(_: Configuration.Type) throws -> Configuration {
        do {
            let environment = ProcessInfo.processInfo.environment
            try UnknownVariables.refuse(table: Configuration.table, arguments: options, environment: environment)
            return try Configuration.load(arguments: options, environment: environment)
        } catch {
            throw Self.configurationFailure(error)
        }
    }

    /// A setting the command cannot run with: its error as one line on standard error, exit 2.
    static func configurationFailure(_ error: any Error) -> ExitCode {
        CommandFailure.configuration(command: configuration.commandName ?? "", error)
    }
}

/// How a command stops for a setting it cannot run with (the long-running commands, and the gateway's tools `submit`
/// and `tail`): one line on standard error naming it, exit 2, instead of a usage text or an error dump.
enum CommandFailure {
    static func configuration(command: String, _ error: any Error) -> ExitCode {
        let text: String
        switch error {
        case let error as ValidationError: text = error.message
        case let error as ConfigurationError: text = error.description
        default: text = "\(error)"
        }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("verify-worker \(command): \(line)\n".utf8))
        return ExitCode(2)
    }
}

/// The log output every long-running command installs: JSON lines or text on standard error, at one level, for
/// every logger of the process.
enum LogOutput {
    static func install(level: Logger.Level, json: Bool) {
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, level: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
