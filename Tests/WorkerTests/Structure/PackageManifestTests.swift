import Foundation
import Testing

/// `Package.swift` says what is true. Each Swift target declares exactly the modules its sources import: no dead
/// edge, and no import that only compiles because another dependency brought the module along
/// (`MemberImportVisibility` catches members; this catches whole modules). Targets are told apart by kind, never by
/// name: a name prefix let a Swift target whose name starts with "C" escape the check.
@Suite("Structure: Package.swift declares exactly what each target imports")
struct PackageManifestTests {
    /// Modules of the toolchain and the platform, never declared in the manifest.
    static let platformModules: Set<String> = [
        "Foundation", "Testing", "Synchronization", "Dispatch", "Glibc", "CoreFoundation",
    ]

    struct DeclaredTarget {
        /// The manifest's spelling: `target`, `executableTarget`, `testTarget`, `systemLibrary`, `binaryTarget`,
        /// `plugin` or `macro`.
        let kind: String
        let name: String
        let directory: String
        let dependencies: Set<String>

        /// A module of C: a system library (a module map over a library of the system) or a target whose folder holds
        /// C sources and no Swift file. Every other target is Swift, and its imports are checked.
        var isCModule: Bool {
            if kind == "systemLibrary" || kind == "binaryTarget" { return true }
            let files = (try? TestEnvironment.swiftFiles(under: directory)) ?? []
            return files.isEmpty
        }
    }

    static func declaredTargets() throws -> [DeclaredTarget] {
        let manifest = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let target = try NSRegularExpression(
            pattern:
                #"\.(target|executableTarget|testTarget|systemLibrary|binaryTarget|plugin|macro)\(\s*name: "(\w+)"(,\s*dependencies: \[(.*?)\])?"#,
            options: [.dotMatchesLineSeparators])
        let dependency = try NSRegularExpression(
            pattern: #"(?:^\s*|\[\s*)"(\w+)"|\.product\(name: "(\w+)""#, options: [.anchorsMatchLines])
        return target.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)).map { match in
            let kind = String(manifest[Range(match.range(at: 1), in: manifest)!])
            let name = String(manifest[Range(match.range(at: 2), in: manifest)!])
            var dependencies: Set<String> = []
            if let range = Range(match.range(at: 4), in: manifest) {
                let list = String(manifest[range])
                for found in dependency.matches(in: list, range: NSRange(list.startIndex..., in: list)) {
                    for group in [1, 2] {
                        if let r = Range(found.range(at: group), in: list) { dependencies.insert(String(list[r])) }
                    }
                }
            }
            return DeclaredTarget(
                kind: kind, name: name, directory: (kind == "testTarget" ? "Tests/" : "Sources/") + name,
                dependencies: dependencies)
        }
    }

    static func imports(under directory: String) throws -> Set<String> {
        let statement = try NSRegularExpression(
            pattern: #"^(?:@testable |@preconcurrency )?import (\w+)"#, options: [.anchorsMatchLines])
        var modules: Set<String> = []
        for (_, text) in try TestEnvironment.swiftFiles(under: directory) {
            for match in statement.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                modules.insert(String(text[Range(match.range(at: 1), in: text)!]))
            }
        }
        return modules
    }

    @Test("every Swift target's declared dependencies are exactly the modules its sources import")
    func dependenciesAreImports() throws {
        let targets = try Self.declaredTargets()
        #expect(targets.count >= 15, "the manifest was read: \(targets.map(\.name))")
        for target in targets where !target.isCModule {
            let imported = try Self.imports(under: target.directory).subtracting(Self.platformModules)
            let dead = target.dependencies.subtracting(imported)
            let undeclared = imported.subtracting(target.dependencies).subtracting([target.name])
            #expect(dead.isEmpty, "\(target.name) declares but never imports \(dead.sorted())")
            #expect(undeclared.isEmpty, "\(target.name) imports but does not declare \(undeclared.sorted())")
        }
    }

    @Test("only the C modules are left out of the import check, whatever a target's name")
    func everySwiftTargetIsChecked() throws {
        let targets = try Self.declaredTargets()
        let directories = try FileManager.default.contentsOfDirectory(
            at: TestEnvironment.packageRoot.appendingPathComponent("Sources"), includingPropertiesForKeys: nil
        ).map(\.lastPathComponent)
        // Every folder of Sources is a target the manifest declares, so none is left out by not being read.
        #expect(
            Set(directories.filter { !$0.hasPrefix(".") })
                == Set(targets.filter { $0.kind != "testTarget" }.map(\.name)))
        // Each module left out is C: a system library's module map, or C sources.
        for module in targets.filter(\.isCModule) where module.kind != "systemLibrary" {
            let files = FileManager.default.enumerator(
                at: TestEnvironment.packageRoot.appendingPathComponent(module.directory),
                includingPropertiesForKeys: nil)
            let cFiles = (files?.allObjects as? [URL] ?? []).filter { ["c", "h"].contains($0.pathExtension) }
            #expect(!cFiles.isEmpty, "\(module.name) has neither Swift nor C sources")
        }
        // A Swift target whose name starts like a C module's is checked as any other.
        #expect(targets.contains { $0.name == "Chaos" && !$0.isCModule })
    }

    @Test("the strict settings are applied once, to every Swift target, with MemberImportVisibility on")
    func strictSettingsOnce() throws {
        let manifest = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(manifest.contains(#".enableUpcomingFeature("MemberImportVisibility")"#))
        #expect(manifest.contains(#".enableUpcomingFeature("ExistentialAny")"#))
        // One place applies them: no target lists its own settings.
        #expect(manifest.components(separatedBy: "swiftSettings: ").count == 1)
        #expect(manifest.contains("for target in package.targets"))
    }
}
