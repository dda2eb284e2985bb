import CoreFoundation
import Foundation
import Glibc
import Logging
import Messages

/// A swift-log handler that writes one JSON object per line to standard error: `ts`, `level`, `msg`, `label`,
/// and the metadata's keys flattened at the top level (see ``LogKeys``). Lines are written whole with one
/// `write(2)` so lines from concurrent tasks never interleave.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let sink: @Sendable ([UInt8]) -> Void

    /// - Parameters:
    ///   - sink: where finished lines go; standard error by default, a capture in tests.
    public init(
        label: String, level: Logger.Level = .info, metadataProvider: Logger.MetadataProvider? = nil,
        sink: @escaping @Sendable ([UInt8]) -> Void = JSONLogHandler.standardError
    ) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var line = "{\"ts\":\"" + RFC3339.format(Date()) + "\",\"level\":\"" + event.level.rawValue + "\",\"label\":"
        Self.appendQuoted(label, to: &line)
        line += ",\"msg\":"
        Self.appendQuoted(event.message.description, to: &line)
        for key in merged.keys.sorted() where !["ts", "level", "label", "msg"].contains(key) {
            line += ","
            Self.appendQuoted(key, to: &line)
            line += ":"
            Self.append(merged[key]!, to: &line)
        }
        line += "}\n"
        sink(Array(line.utf8))
    }

    public static let standardError: @Sendable ([UInt8]) -> Void = { bytes in
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }

    static func append(_ value: Logger.Metadata.Value, to line: inout String) {
        switch value {
        case .string(let text): appendQuoted(text, to: &line)
        case .stringConvertible(let convertible): appendQuoted(convertible.description, to: &line)
        case .array(let values):
            line += "["
            for (index, element) in values.enumerated() {
                if index > 0 { line += "," }
                append(element, to: &line)
            }
            line += "]"
        case .dictionary(let dictionary):
            line += "{"
            for (index, key) in dictionary.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                appendQuoted(key, to: &line)
                line += ":"
                append(dictionary[key]!, to: &line)
            }
            line += "}"
        }
    }

    static func appendQuoted(_ text: String, to line: inout String) {
        line += "\""
        JSONQuoting.appendEscaped(text, to: &line)
        line += "\""
    }
}
