import Foundation
import Operations

/// Where the tests find what they need outside the package: the shared fixtures, the built
/// `verify-worker` binary and the services `.ci/run` starts. Under `CI=true` a missing service is a
/// failure with a message that says how to provide it, never a silent skip.
enum TestEnvironment {
    /// True when the suite runs under CI (`CI=true`), where nothing may be skipped.
    static var isCI: Bool {
        ProcessInfo.processInfo.environment["CI"].map { $0 == "true" || $0 == "1" } ?? false
    }

    /// The package root (the folder holding `Package.swift`), found from this source file.
    static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url
            }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// Every Swift file under `folder` (a path from the package root), as its path from the root and its text: what
    /// the structure tests scan.
    static func swiftFiles(under folder: String) throws -> [(path: String, text: String)] {
        let root = packageRoot
        var found: [(path: String, text: String)] = []
        let files = FileManager.default.enumerator(
            at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            found.append(
                (String(url.path.dropFirst(root.path.count + 1)), try String(contentsOf: url, encoding: .utf8)))
        }
        return found
    }

    /// `../shared/fixtures` beside the package (overridable with `VERIFY_FIXTURES_DIR`).
    static var fixturesDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["VERIFY_FIXTURES_DIR"] {
            return URL(fileURLWithPath: dir)
        }
        return packageRoot.deletingLastPathComponent().appendingPathComponent("shared/fixtures")
    }

    /// The bytes of one shared fixture, by its path below `shared/fixtures` (e.g. `"mbaasy/decoder_unified_sandbox.txt"`).
    static func fixture(_ relativePath: String) throws -> Data {
        let url = fixturesDirectory.appendingPathComponent(relativePath)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw MissingResource(
                what: "fixture \(relativePath)",
                hint: "expected at \(url.path); clone the project beside shared/ or set VERIFY_FIXTURES_DIR")
        }
        return data
    }

    /// The `verify-worker` executable that `swift build`/`swift test` built next to the test bundle.
    static func verifyWorkerBinary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["VERIFY_WORKER_BINARY"] {
            return URL(fileURLWithPath: path)
        }
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("verify-worker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir.deleteLastPathComponent()
        }
        for config in ["debug", "release"] {
            let candidate = packageRoot.appendingPathComponent(".build/\(config)/verify-worker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw MissingResource(
            what: "the verify-worker binary", hint: "run `swift build` first or set VERIFY_WORKER_BINARY")
    }

    /// A required environment value for a service (for example `VERIFY_TEST_POSTGRES_URL`).
    static func service(_ variable: String, startWith hint: String) throws -> String {
        if let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty { return value }
        throw MissingResource(what: "\(variable) is not set", hint: hint)
    }
}

/// A test prerequisite that is not there, with what to do about it.
struct MissingResource: Error, CustomStringConvertible {
    let what: String
    let hint: String
    var description: String { "missing \(what): \(hint)" }
}
