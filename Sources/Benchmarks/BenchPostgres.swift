import Foundation
import Traffic

/// The throwaway PostgreSQL of `scripts/test-postgres.sh` (or `$VERIFY_PG_SCRIPT`), for the ledger and entitlement
/// benchmarks when no `--postgres-url` is given.
package enum BenchPostgres {
    /// The script is missing, failed, or printed no URL.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Runs `body` with `given`, or else with the running test PostgreSQL, or else with one started here (and stopped
    /// again whatever `body` does).
    package static func with<T>(url given: String?, _ body: (String) async throws -> T) async throws -> T {
        if let given { return try await body(given) }
        if let url = try? await script("url") { return try await body(url) }
        let url: String
        do {
            url = try await script("start")
        } catch {
            throw Failure(
                description: "no --postgres-url given and scripts/test-postgres.sh could not start one (\(error)); "
                    + "run it as root from the package root, or pass --postgres-url")
        }
        do {
            let result = try await body(url)
            _ = try? await script("stop")
            return result
        } catch {
            _ = try? await script("stop")
            throw error
        }
    }

    /// Runs the script with `argument` (its stderr passes through) and returns its last line of output.
    static func script(_ argument: String) async throws -> String {
        let path = ProcessInfo.processInfo.environment["VERIFY_PG_SCRIPT"] ?? "scripts/test-postgres.sh"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw Failure(description: "\(path) not found (run from the package root or set VERIFY_PG_SCRIPT)")
        }
        let process = try ChildProcess(executable: path, arguments: [argument], readsLines: true)
        let lines = await process.allLines()
        // stdout closed: the script has ended or is ending (`initdb` and a server start take seconds).
        let exit = await process.waitForExit(timeout: .seconds(300))
        guard exit == .exited(0) else {
            if exit == nil { await process.stop() }
            throw Failure(description: "\(path) \(argument) exited with \(exit.map { "\($0)" } ?? "no exit")")
        }
        return lines.last ?? ""
    }
}
