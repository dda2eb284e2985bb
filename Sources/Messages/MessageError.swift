/// Why bytes could not be read as a message. The description names the field and the rule, never the
/// field's value (a value could be a whole receipt).
public struct MessageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure; its raw value is the stable `reason` written to the dead-letter topic.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// Larger than the configured limit; not parsed at all.
        case oversized
        /// Not JSON (or not UTF-8, or nested too deeply).
        case notJSON = "not_json"
        /// A required field is absent.
        case missingField = "missing_field"
        /// A field has the wrong JSON type.
        case wrongType = "wrong_type"
        /// A field has the right type but a value the contract forbids.
        case invalidValue = "invalid_value"
        /// The `schema` tag names a version this build does not understand.
        case unsupportedSchema = "unsupported_schema"
    }

    public var code: Code
    /// The JSON path of the offending field, when there is one (e.g. `transactions[0].product_id`).
    public var field: String?
    /// What rule was broken, without any value from the message.
    public var detail: String

    public init(_ code: Code, field: String? = nil, _ detail: String) {
        self.code = code
        self.field = field
        self.detail = detail
    }

    public var description: String {
        if let field { return "\(code.rawValue): \(field): \(detail)" }
        return "\(code.rawValue): \(detail)"
    }
}
