import Foundation
import Messages

/// Why the gateway refused or could not take a request: a stable code, the HTTP status it maps to, and a message
/// that names the field and the rule but never quotes a value (a value could be a whole receipt).
public struct GatewayError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable error codes, written as `{"error": code}`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The body is larger than the limit (413); nothing was parsed.
        public static let tooLarge = Code(rawValue: "too_large")
        /// `Content-Type` is not `application/json` (415).
        public static let unsupportedMediaType = Code(rawValue: "unsupported_media_type")
        /// Not JSON, or not a JSON object (400).
        public static let notJSON = Code(rawValue: MessageError.Code.notJSON.rawValue)
        /// A required field is absent (400).
        public static let missingField = Code(rawValue: MessageError.Code.missingField.rawValue)
        /// A field has the wrong JSON type (400).
        public static let wrongType = Code(rawValue: MessageError.Code.wrongType.rawValue)
        /// A field breaks a rule of the contract (400).
        public static let invalidValue = Code(rawValue: MessageError.Code.invalidValue.rawValue)
        /// The `schema` tag is not one this build understands (400).
        public static let unsupportedSchema = Code(rawValue: MessageError.Code.unsupportedSchema.rawValue)
        /// `POST /v1/receipts` without an accepted bearer token (401, with `WWW-Authenticate: Bearer`).
        public static let unauthorized = Code(rawValue: "unauthorized")
        /// A Pub/Sub push whose OIDC token fails a check (401): the message names the check, never the token.
        public static let unauthenticated = Code(rawValue: "unauthenticated")
        /// Google's signing keys for push tokens could not be read (503: Pub/Sub delivers the push again).
        public static let keysUnavailable = Code(rawValue: "keys_unavailable")
        /// A notification whose signature or certificate chain does not verify against the trust anchors (403).
        public static let untrustedSignature = Code(rawValue: "untrusted_signature")
        /// A frontend's job with a `job_id` of the notification namespace (starting with `apple-notification-`, or a
        /// Google Play notification job's prefix, 400).
        /// Only verified notifications may use them; the notifications' `account_id` is refused as `invalid_value`.
        public static let reservedID = Code(rawValue: "reserved_id")
        /// Kafka did not acknowledge in time, or failed for a reason that may pass (503: retry with the same
        /// `job_id`).
        public static let kafkaUnavailable = Code(rawValue: "kafka_unavailable")
        /// Kafka refused the job for good (an error librdkafka calls permanent for a message, such as a topic this
        /// gateway may not write, or an invalid record): sending it again cannot succeed until the operator fixes the
        /// cause (500). A record too large is `too_large` instead.
        public static let kafkaRefused = Code(rawValue: "kafka_refused")
        /// The gateway is shutting down (503).
        public static let shuttingDown = Code(rawValue: "shutting_down")
    }

    public var code: Code
    /// The offending field, when there is one.
    public var field: String?
    /// What went wrong, without any value from the request.
    public var message: String
    public var file: String
    public var line: Int

    public init(_ code: Code, field: String? = nil, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.field = field
        self.message = message
        self.file = file
        self.line = line
    }

    /// A codec error of the message contract, as the gateway answers it.
    public init(_ error: MessageError, file: String = #fileID, line: Int = #line) {
        let code: Code = error.code == .oversized ? .tooLarge : Code(rawValue: error.code.rawValue)
        self.init(
            code, field: error.field, error.field.map { "\($0): \(error.detail)" } ?? error.detail,
            file: file, line: line)
    }

    /// The HTTP status this error is answered with.
    public var httpStatus: Int {
        switch code {
        case .unauthorized, .unauthenticated: 401
        case .untrustedSignature: 403
        case .tooLarge: 413
        case .unsupportedMediaType: 415
        case .kafkaRefused: 500
        case .kafkaUnavailable, .shuttingDown, .keysUnavailable: 503
        default: 400
        }
    }

    /// True when the client should send the same request again later.
    public var isRetryable: Bool { httpStatus == 503 }

    /// `{"error": code, "message": …, "field": …}`.
    public var jsonBody: [UInt8] {
        var object: [String: String] = ["error": code.rawValue, "message": message]
        if let field { object["field"] = field }
        return GatewayJSON.encode(object)
    }

    public static func == (lhs: GatewayError, rhs: GatewayError) -> Bool {
        lhs.code == rhs.code && lhs.field == rhs.field && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(field)
        hasher.combine(message)
    }

    public var description: String { "GatewayError \(code): \(message) (at \(file):\(line))" }
}

/// Small JSON writing for answers and tool output: sorted keys, no escaped slashes, one line.
public enum GatewayJSON {
    public static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding dictionaries of strings and numbers cannot fail.
        return (try? Array(encoder.encode(value))) ?? Array("{}".utf8)
    }

    public static func line(_ value: some Encodable) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }
}
