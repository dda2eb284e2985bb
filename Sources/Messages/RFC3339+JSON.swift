import Foundation

extension RFC3339 {
    /// A `JSONDecoder` that reads dates as RFC 3339 text (`parse`): the one reading of dates in the
    /// messages and in the entitlement store's stored documents.
    public static func jsonDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an RFC 3339 date-time")
            }
            return date
        }
        return decoder
    }

    /// A `JSONEncoder` that writes dates as RFC 3339 with milliseconds (`format`), keys sorted and slashes not
    /// escaped: the contract's form, for the messages and the entitlement API's bodies.
    public static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(format(date))
        }
        return encoder
    }
}
