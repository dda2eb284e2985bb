import Foundation

/// Reads and writes the JSON of every message, with the contract's rules: strict about required fields and
/// types, tolerant of unknown fields, and no parsing at all of input larger than ``maximumMessageBytes``.
public struct MessageCodec: Sendable {
    /// The largest message accepted, in bytes. Default: 1 MiB.
    public var maximumMessageBytes: Int

    public init(maximumMessageBytes: Int = 1 << 20) {
        self.maximumMessageBytes = maximumMessageBytes
    }

    /// Decodes a job, or throws a ``MessageError`` whose code is the dead-letter reason.
    ///
    /// A job of the plain shape is read by ``MessageJSONReader``; anything else, refusals included, by `JSONDecoder`.
    public func decodeJob(_ bytes: some Collection<UInt8>) throws(MessageError) -> ReceiptJob {
        try checkSize(bytes)
        if let job = MessageJSONReader.job(from: bytes) { return job }
        return try decode(ReceiptJob.self, from: bytes)
    }

    /// Decodes a verdict (for consumers and tools such as `verify-worker tail`), the same way as a job.
    public func decodeVerdict(_ bytes: some Collection<UInt8>) throws(MessageError) -> Verdict {
        try checkSize(bytes)
        if let verdict = MessageJSONReader.verdict(from: bytes) { return verdict }
        return try decode(Verdict.self, from: bytes)
    }

    /// Written by ``MessageJSONWriter``: the same bytes as `JSONEncoder` with sorted keys, several times faster.
    public func encode(_ job: ReceiptJob) -> [UInt8] { MessageJSONWriter.encode(job) }
    public func encode(_ verdict: Verdict) -> [UInt8] { MessageJSONWriter.encode(verdict) }

    private func checkSize(_ bytes: some Collection<UInt8>) throws(MessageError) {
        guard bytes.count <= maximumMessageBytes else {
            throw MessageError(.oversized, "\(bytes.count) bytes, limit \(maximumMessageBytes)")
        }
    }

    func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws(MessageError) -> T {
        guard bytes.count <= maximumMessageBytes else {
            throw MessageError(.oversized, "\(bytes.count) bytes, limit \(maximumMessageBytes)")
        }
        do {
            return try RFC3339.jsonDecoder().decode(T.self, from: Data(bytes))
        } catch let error as MessageError {
            throw error
        } catch let error as DecodingError {
            throw MessageError(decodingError: error)
        } catch {
            throw MessageError(.notJSON, "\(type) could not be read")
        }
    }

    static func encodeValue(_ value: some Encodable) -> [UInt8] {
        let encoder = RFC3339.jsonEncoder()
        // Encoding these value types cannot fail: every field is a string, number, bool, date or array of them.
        return (try? Array(encoder.encode(value))) ?? []
    }
}

extension MessageError {
    /// Maps Foundation's decoding error to the contract's codes, naming the field but never quoting its value.
    init(decodingError: DecodingError) {
        func path(_ codingPath: [any CodingKey], _ key: (any CodingKey)? = nil) -> String? {
            let keys = codingPath + (key.map { [$0] } ?? [])
            guard !keys.isEmpty else { return nil }
            return keys.reduce(into: "") { text, key in
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : "." + key.stringValue
                }
            }
        }
        switch decodingError {
        case .keyNotFound(let key, let context):
            self.init(.missingField, field: path(context.codingPath, key), "required")
        case .valueNotFound(_, let context):
            self.init(.missingField, field: path(context.codingPath), "required, found null")
        case .typeMismatch(let type, let context):
            self.init(.wrongType, field: path(context.codingPath), "expected \(Self.jsonTypeName(type))")
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            self.init(.notJSON, "not a JSON object in UTF-8")
        case .dataCorrupted(let context):
            self.init(.invalidValue, field: path(context.codingPath), context.debugDescription)
        @unknown default:
            self.init(.notJSON, "unreadable")
        }
    }

    static func jsonTypeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "string"
        case is Int.Type, is Double.Type: "number"
        case is Bool.Type: "boolean"
        case is [Any].Type: "array"
        default: "object"
        }
    }
}
