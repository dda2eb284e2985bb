import Foundation

/// A report `verify-worker chaos` prints when a run ends.
public protocol ChaosPrintedReport: Encodable {}

extension ChaosPrintedReport {
    /// The report as one pretty JSON document, keys sorted, slashes left as they are (it names paths); `{}` if it
    /// cannot be encoded.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
