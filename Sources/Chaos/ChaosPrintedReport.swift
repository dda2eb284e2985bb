import Foundation

/// A report `verify-worker chaos` prints when a run ends.
public protocol ChaosPrintedReport: Encodable {}

extension ChaosPrintedReport {
    /// The report as one pretty JSON document, keys sorted and in snake case (a report's Swift names converted, as
    /// the benchmarks print theirs; a report spells out a key only where it is not its name's snake case), slashes
    /// left as they are (it names paths); `{}` if it cannot be encoded.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
