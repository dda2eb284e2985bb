import Foundation
import Testing

/// Issue 15.6: `Package.swift` says what is true. Each target declares exactly the modules its sources import: no
/// dead edge, and no import that only compiles because another dependency brought the module along
/// (`MemberImportVisibility` catches members; this catches whole modules).
@Suite("Structure: Package.swift declares exactly what each target imports")
struct PackageManifestTests {
    /// Modules of the toolchain and the platform, never declared in the manifest.
    static let platformModules: Set<String> = [
        "Foundation", "Testing", "Synchronization", "Dispatch", "Glibc", "CoreFoundation",
    ]

    struct DeclaredTarget {
        let name: String
        let directory: String
        let dependencies: Set<String>
    }

    static func declaredTargets() throws -> [DeclaredTarget] {
        let manifest = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let target = try NSRegularExpression(
            pattern: #"\.(target|executableTarget|testTarget)\(\s*name: "(\w+)"(,\s*dependencies: \[(.*?)\])?"#,
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
                name: name, directory: (kind == "testTarget" ? "Tests/" : "Sources/") + name,
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
        for target in targets where !target.name.hasPrefix("C") {
            let imported = try Self.imports(under: target.directory).subtracting(Self.platformModules)
            let dead = target.dependencies.subtracting(imported)
            let undeclared = imported.subtracting(target.dependencies).subtracting([target.name])
            #expect(dead.isEmpty, "\(target.name) declares but never imports \(dead.sorted())")
            #expect(undeclared.isEmpty, "\(target.name) imports but does not declare \(undeclared.sorted())")
        }
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
