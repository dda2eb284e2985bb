import Foundation
import Testing

/// Every librdkafka call lives in `Sources/Kafka/RDKafka/`: no other source file imports `CRdKafka` or names one of
/// its symbols in code (comments and string literals may cite them).
@Suite("Kafka: the librdkafka boundary")
struct KafkaLayerBoundaryTests {
    static let cFolder = "Sources/Kafka/RDKafka/"

    @Test("No source file outside Sources/Kafka/RDKafka uses librdkafka")
    func noCallOutsideTheRDKafkaFolder() throws {
        let root = TestEnvironment.packageRoot
        var scanned = 0
        var insideFolder = 0
        var offenders: [String] = []
        for path in try Self.swiftFiles(under: root.appendingPathComponent("Sources")) {
            let relative = String(path.dropFirst(root.path.count + 1))
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let uses = LibrdkafkaUseScanner.uses(in: text)
            scanned += 1
            if relative.hasPrefix(Self.cFolder) {
                insideFolder += uses.count
            } else {
                offenders += uses.map { "\(relative):\($0.line): \($0.text)" }
            }
        }
        // Proves the scan saw the package: many files, and the calls where they belong.
        #expect(scanned > 100, "scanned only \(scanned) Swift files below \(root.path)/Sources")
        #expect(insideFolder > 50, "found only \(insideFolder) librdkafka uses in \(Self.cFolder)")
        #expect(offenders.isEmpty, "librdkafka used outside \(Self.cFolder):\n\(offenders.joined(separator: "\n"))")
    }

    @Test("The scanner finds a call and an import, and passes over comments and string literals")
    func scannerSeesCodeOnly() {
        let source = #"""
            import CRdKafka
            // rd_kafka_poll in a comment
            /* rd_kafka_flush in a block
               comment */ let a = 1
            let help = "a numeric rd_kafka_resp_err_t \(a)"
            let multi = """
                rd_kafka_metadata in a multi-line string
                """
            _ = rd_kafka_poll(handle, 100)  // rd_kafka_x
            let code = RD_KAFKA_RESP_ERR_NO_ERROR
            """#
        let lines = LibrdkafkaUseScanner.uses(in: source).map(\.line)
        #expect(lines == [1, 9, 10])
    }

    static func swiftFiles(under folder: URL) throws -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder.path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: folder.path])
        }
        return enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted()
            .map { folder.appendingPathComponent($0).path }
    }
}

/// Finds librdkafka in Swift source: `import CRdKafka`, or an identifier starting with `rd_kafka_`, `RD_KAFKA_` or
/// `crdkafka_` in code, outside comments and string literals.
enum LibrdkafkaUseScanner {
    struct Use: Equatable {
        var line: Int
        var text: String
    }

    static func uses(in source: String) -> [Use] {
        let lines = codeOnly(source).split(separator: "\n", omittingEmptySubsequences: false)
        let original = source.split(separator: "\n", omittingEmptySubsequences: false)
        var found: [Use] = []
        for (index, line) in lines.enumerated() {
            let code = String(line)
            let isImport = code.trimmingCharacters(in: .whitespaces).hasPrefix("import CRdKafka")
            let namesSymbol = ["rd_kafka_", "RD_KAFKA_", "crdkafka_"].contains { code.contains($0) }
            if isImport || namesSymbol {
                found.append(Use(line: index + 1, text: original[index].trimmingCharacters(in: .whitespaces)))
            }
        }
        return found
    }

    /// The source with comments and string literal contents blanked (line breaks kept, so lines keep their numbers).
    static func codeOnly(_ source: String) -> String {
        let characters = Array(source)
        var output: [Character] = []
        output.reserveCapacity(characters.count)
        var index = 0
        func starts(with token: String, at position: Int) -> Bool {
            let token = Array(token)
            return position + token.count <= characters.count
                && Array(characters[position..<position + token.count]) == token
        }
        func blank(_ character: Character) -> Character { character == "\n" ? "\n" : " " }
        while index < characters.count {
            if starts(with: "//", at: index) {
                while index < characters.count, characters[index] != "\n" {
                    output.append(" ")
                    index += 1
                }
            } else if starts(with: "/*", at: index) {
                var depth = 0
                repeat {
                    if starts(with: "/*", at: index) {
                        depth += 1
                        output += [" ", " "]
                        index += 2
                    } else if starts(with: "*/", at: index) {
                        depth -= 1
                        output += [" ", " "]
                        index += 2
                    } else {
                        output.append(blank(characters[index]))
                        index += 1
                    }
                } while depth > 0 && index < characters.count
            } else if characters[index] == "#" || characters[index] == "\"" {
                // A string literal, raw (`#"…"#`) or not, single- or multi-line.
                var hashes = 0
                var position = index
                while position < characters.count, characters[position] == "#" {
                    hashes += 1
                    position += 1
                }
                guard position < characters.count, characters[position] == "\"" else {
                    output.append(characters[index])
                    index += 1
                    continue
                }
                let delimiter = starts(with: "\"\"\"", at: position) ? "\"\"\"" : "\""
                let closing = delimiter + String(repeating: "#", count: hashes)
                output += Array(repeating: " ", count: position - index + delimiter.count)
                index = position + delimiter.count
                while index < characters.count, !starts(with: closing, at: index) {
                    if characters[index] == "\\", hashes == 0, index + 1 < characters.count {
                        output.append(" ")
                        output.append(blank(characters[index + 1]))
                        index += 2
                    } else {
                        output.append(blank(characters[index]))
                        index += 1
                    }
                }
                output += Array(repeating: " ", count: min(closing.count, characters.count - index))
                index += closing.count
            } else {
                output.append(characters[index])
                index += 1
            }
        }
        return String(output)
    }
}
