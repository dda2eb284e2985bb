import Foundation
import Testing

/// One decision vocabulary. A source scan, so a second word for the same thing fails the build's tests the day it is
/// added, not the day two of them disagree. It reads enums and structs alike: a struct with `static let` values is
/// the same second word as an enum with cases.
@Suite("Decision vocabulary")
struct DecisionVocabularyTests {
    /// One Swift file of `Sources`: its path relative to `Sources` and its text.
    struct SourceFile {
        var path: String
        var text: String
    }

    static func sources() throws -> [SourceFile] {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        var files: [SourceFile] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let path = String(url.path.dropFirst(root.path.count + 1))
            files.append(SourceFile(path: path, text: try String(contentsOf: url, encoding: .utf8)))
        }
        return files
    }

    /// Where the scan finds a second word for a thing the codebase names once, as `path: what`.
    static func duplicates(in files: [SourceFile]) -> [String] {
        var found: [String] = []
        for file in files {
            for (kind, name, body) in typeDeclarations(file.text) {
                let cases = Set(caseNames(body, of: name))
                if name.hasSuffix("Environment"), cases.isSuperset(of: ["production", "sandbox"]),
                    name != "AppleEnvironment" || file.path != "Messages/AppleEnvironment.swift"
                {
                    found.append(
                        "\(file.path): \(kind) \(name) spells Production/Sandbox again (use AppleEnvironment)")
                }
                if cases.isSuperset(of: ["consumable", "nonConsumable"]) || name == "ProductType",
                    file.path != "Messages/ProductType.swift"
                {
                    found.append("\(file.path): \(kind) \(name) spells product types again (use ProductType)")
                }
                if name.contains("RFC3339"), file.path != "Messages/RFC3339.swift" {
                    found.append("\(file.path): \(kind) \(name) is a second RFC 3339 codec (use RFC3339)")
                }
            }
            for match in matches(#"struct\s+(\w*Catalog)\b"#, in: file.text)
            where match != "Catalog" || file.path != "Messages/Catalog.swift" {
                found.append("\(file.path): struct \(match) is a second catalog type (use Catalog)")
            }
            // Verdict names the Kafka message only: a local reading, an applied message or a health check is not one.
            for match in matches(#"(?:struct|enum|class|actor|typealias)\s+(\w*Verdict)\b"#, in: file.text)
            where match != "Verdict" || file.path != "Messages/Verdict.swift" {
                found.append("\(file.path): type \(match) is not the verdict message (Verdict names only it)")
            }
            for formatter in ["ISO8601FormatStyle", "ISO8601DateFormatter", "yyyy-MM-dd'T'", "gmtime_r"]
            where file.text.contains(formatter) {
                found.append("\(file.path): \(formatter) formats RFC 3339 dates again (use RFC3339)")
            }
            if file.path.hasPrefix("Worker/"),
                file.text.contains("DecisionRules.") || file.text.contains("DecisionInput(")
                    || file.text.contains("DecisionPolicy(")
            {
                found.append("\(file.path): enters the decision rules outside LedgerSettlement")
            }
        }
        return found
    }

    /// `enum Name … { body }` and `struct Name … { body }` as (kind, name, body), the body up to the matching brace.
    static func typeDeclarations(_ text: String) -> [(String, String, Substring)] {
        var result: [(String, String, Substring)] = []
        var searchStart = text.startIndex
        while let range = text.range(
            of: #"\b(enum|struct)\s+\w+"#, options: .regularExpression, range: searchStart..<text.endIndex)
        {
            let words = text[range].split(whereSeparator: \.isWhitespace).map(String.init)
            let kind = words.first ?? ""
            let name = words.last ?? ""
            guard let open = text[range.upperBound...].firstIndex(of: "{") else { break }
            var depth = 0
            var index = open
            while index < text.endIndex {
                if text[index] == "{" { depth += 1 }
                if text[index] == "}" {
                    depth -= 1
                    if depth == 0 { break }
                }
                index = text.index(after: index)
            }
            result.append((kind, name, text[open..<min(index, text.endIndex)]))
            searchStart = range.upperBound
        }
        return result
    }

    /// The values a type offers: an enum's cases and the static values of the type itself
    /// (`static let production = Name(…)`, `Self(…)` or `.init(…)`, or `static var production: Name { … }`), not
    /// static constants of other types.
    static func caseNames(_ body: Substring, of name: String) -> [String] {
        let ownType = "(?:\(name)|Self)"
        let storedValue =
            #"static\s+(?:let|var)\s+(\w+)\s*(?::\s*"# + ownType + #"\s*)?=\s*(?:"# + ownType + #"|\.init)\b"#
        let computedValue = #"static\s+var\s+(\w+)\s*:\s*"# + ownType + #"\s*\{"#
        return matches(#"case\s+(\w+)"#, in: String(body)) + matches(storedValue, in: String(body))
            + matches(computedValue, in: String(body))
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        guard let expression = try? NSRegularExpression(pattern: pattern) else { return [] }
        let range = NSRange(text.startIndex..., in: text)
        return expression.matches(in: text, range: range).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    @Test("Sources name products, environments, catalogs, verdicts and RFC 3339 dates once, and enter the rules once")
    func sourcesSpeakOneVocabulary() throws {
        let files = try Self.sources()
        #expect(files.count > 100, "found \(files.count) Swift files under Sources")
        let found = Self.duplicates(in: files)
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }

    @Test("the scan finds each kind of second word, spelled as an enum or as a struct")
    func scanFindsSecondWords() {
        let before = [
            SourceFile(
                path: "Receipts/Catalog.swift",
                text: """
                    public struct Catalog: Sendable {
                        public enum ProductType: String { case consumable, nonConsumable }
                    }
                    """),
            SourceFile(
                path: "RateLimiter/AppleEndpoint.swift",
                text: "public enum Environment: String { case production\n case sandbox }"),
            SourceFile(path: "Receipts/Formats/RFC3339.swift", text: "enum RFC3339 { static func parse() {} }"),
            SourceFile(
                path: "AppleSimulator/AppleDates.swift", text: "let s = date.formatted(Date.ISO8601FormatStyle())"),
            SourceFile(
                path: "Worker/Flow/JobProcessor.swift", text: "let result = DecisionRules.decide(input)"),
            SourceFile(path: "Entitlements/EntitlementCatalog.swift", text: "public struct EntitlementCatalog {}"),
            SourceFile(
                path: "Receipts/Model/ReceiptAnalysis.swift",
                text: """
                    public struct ReceiptEnvironment: RawRepresentable {
                        public static let production = ReceiptEnvironment(rawValue: "Production")
                        public static let sandbox = ReceiptEnvironment(rawValue: "Sandbox")
                    }
                    """),
            SourceFile(
                path: "Ledger/LedgerProduct.swift",
                text: """
                    struct LedgerProductType {
                        static let consumable = LedgerProductType()
                        static let nonConsumable = LedgerProductType()
                    }
                    """),
            SourceFile(path: "Gateway/Dates.swift", text: "struct GatewayRFC3339 { func format() {} }"),
            SourceFile(path: "Receipts/LocalVerdict.swift", text: "public enum LocalVerdict: Sendable {}"),
            SourceFile(path: "Gateway/Tools/HealthProbe.swift", text: "    public struct Verdict: Sendable {}"),
        ]
        let found = Self.duplicates(in: before)
        for fragment in [
            "Receipts/Catalog.swift: struct Catalog", "Receipts/Catalog.swift: enum ProductType",
            "RateLimiter/AppleEndpoint.swift: enum Environment", "Receipts/Formats/RFC3339.swift: enum RFC3339",
            "AppleSimulator/AppleDates.swift: ISO8601FormatStyle", "Worker/Flow/JobProcessor.swift: enters",
            "Entitlements/EntitlementCatalog.swift: struct EntitlementCatalog",
            "Receipts/Model/ReceiptAnalysis.swift: struct ReceiptEnvironment",
            "Ledger/LedgerProduct.swift: struct LedgerProductType", "Gateway/Dates.swift: struct GatewayRFC3339",
            "Receipts/LocalVerdict.swift: type LocalVerdict", "Gateway/Tools/HealthProbe.swift: type Verdict",
        ] {
            #expect(found.contains { $0.hasPrefix(fragment) }, "\(fragment) not in \(found)")
        }
    }
}
