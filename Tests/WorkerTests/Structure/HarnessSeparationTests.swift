import Foundation
import Testing

/// The product apart from its harness. Benchmarks, fuzzers, load generators and traffic live in the
/// harness targets, which may depend on the product, never the reverse.
@Suite("Structure: the product targets hold no harness code and depend on no harness target")
struct HarnessSeparationTests {
    /// The targets that ship: what a worker, the gateway or the entitlement service runs.
    static let productTargets: Set<String> = [
        "Observability", "CodedErrors", "Deadlines", "Messages", "Kafka", "Receipts", "AppleClients", "RateLimiter",
        "Ledger",
        "Decision", "StoreHTTP", "GooglePlayClients",
        "Worker", "Operations", "Gateway", "Entitlements",
    ]
    /// The targets that only measure, generate or simulate.
    static let harnessTargets: Set<String> = [
        "Traffic", "Benchmarks", "Demo", "Chaos", "AppleSimulator", "PlaySimulator",
    ]
    /// Words that mark a harness file by its path.
    static let harnessWords = ["Benchmark", "Load", "Traffic", "Fuzz", "Wrk", "Storm"]
    /// Files that stay in a product target on purpose, each with its reason; the test fails if one disappears, so
    /// the list never outlives its files. Empty: harness code that needs a product target's
    /// internals reads them through `package` access (the receipt cost breakdown, the storm simulation).
    static let knownExceptions: [String: String] = [:]

    @Test("no file under a product target's folder is named like harness code")
    func noHarnessFilesInProduct() throws {
        let root = TestEnvironment.packageRoot
        var offenders: [String] = []
        var seenExceptions: Set<String> = []
        for target in Self.productTargets {
            let directory = root.appendingPathComponent("Sources/\(target)")
            let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
            while let url = files?.nextObject() as? URL {
                guard url.pathExtension == "swift" else { continue }
                let path = String(url.path.dropFirst(root.path.count + 1))
                guard Self.harnessWords.contains(where: { path.contains($0) }) else { continue }
                if Self.knownExceptions[path] != nil {
                    seenExceptions.insert(path)
                } else {
                    offenders.append(path)
                }
            }
        }
        #expect(offenders.isEmpty, "harness code in product targets: \(offenders.sorted())")
        #expect(seenExceptions == Set(Self.knownExceptions.keys), "stale exceptions")
    }

    @Test("no product target depends on a harness target")
    func productDependsOnNoHarness() throws {
        let targets = try PackageManifestTests.declaredTargets()
        #expect(Set(targets.map(\.name)).isSuperset(of: Self.harnessTargets.subtracting(["Demo"])))
        for target in targets where Self.productTargets.contains(target.name) {
            let harness = target.dependencies.intersection(Self.harnessTargets)
            #expect(harness.isEmpty, "\(target.name) depends on harness targets \(harness.sorted())")
        }
    }

    /// The product's `JobSubmitter` is the one way a harness puts jobs on `receipt-jobs`: a harness file that
    /// proves a delivery itself or builds a record for the jobs topic is a second submitter coming back.
    @Test("the harness submits jobs only through the product's JobSubmitter")
    func harnessSubmitsThroughJobSubmitter() throws {
        let ownRecord = try NSRegularExpression(pattern: #"KafkaProducerRecord\(\s*topic:\s*Topics\.jobs\b"#)
        var offenders: [String] = []
        for target in Self.harnessTargets.sorted() {
            for (path, text) in try TestEnvironment.swiftFiles(under: "Sources/\(target)") {
                let range = NSRange(text.startIndex..., in: text)
                if text.contains("sendConfirmed(") || ownRecord.firstMatch(in: text, range: range) != nil {
                    offenders.append(path)
                }
            }
        }
        #expect(offenders.isEmpty, "harness files that submit jobs themselves: \(offenders.sorted())")
    }

    @Test("no test imports the executable: tests import libraries, and run the built binary as a child")
    func testsImportNoExecutable() throws {
        var offenders: [String] = []
        for (path, text) in try TestEnvironment.swiftFiles(under: "Tests") {
            let imports = text.split(separator: "\n").filter { line in
                let words = line.split(separator: " ")
                return words.count >= 2 && words.contains("import") && words.last == "VerifyWorker"
            }
            if !imports.isEmpty { offenders.append(path) }
        }
        #expect(offenders.isEmpty, "tests that import the executable: \(offenders.sorted())")
    }
}
