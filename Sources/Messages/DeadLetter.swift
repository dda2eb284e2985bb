/// A message from `receipt-jobs` that is not a valid job, as written to `receipt-jobs-dlq`.
///
/// The record's value is the original bytes, untouched, so nothing is lost and an operator can replay it after
/// a fix; why it was rejected travels in headers (the convention of Kafka Connect's dead-letter queues), so the
/// original payload never has to be escaped or re-encoded. Only a value too large for one record of the
/// dead-letter topic is cut (``truncated(valueBytes:keyBytes:)``): a dead letter must always be deliverable, or
/// its partition stalls; the cut one names the whole value's size and SHA-256 digest (``truncation``).
public struct DeadLetter: Sendable, Hashable {
    /// The original message value, byte for byte.
    public var original: [UInt8]
    /// The original message key, if it had one.
    public var key: [UInt8]?
    /// A stable machine code (``MessageError/Code`` raw values, or a pipeline code such as `poison`).
    public var reason: String
    /// Human-readable detail; never contains field values from the message.
    public var error: String
    /// Where the message came from.
    public var sourceTopic: String
    public var sourcePartition: Int32
    public var sourceOffset: Int64
    /// Set when `original` (or `key`) holds only the first bytes of what was rejected; nil when both are whole.
    public var truncation: Truncation?

    /// What a truncated dead letter no longer holds whole.
    public struct Truncation: Sendable, Hashable {
        /// The size of the whole rejected value.
        public var originalBytes: Int
        /// The SHA-256 digest of the whole rejected value, 64 lowercase hexadecimal digits.
        public var originalSHA256: String
        /// The size of the whole key, when the key was cut too (a key larger than a record could hold); nil when the
        /// key is whole.
        public var originalKeyBytes: Int?

        public init(originalBytes: Int, originalSHA256: String, originalKeyBytes: Int? = nil) {
            self.originalBytes = originalBytes
            self.originalSHA256 = originalSHA256
            self.originalKeyBytes = originalKeyBytes
        }
    }

    public init(
        original: [UInt8], key: [UInt8]?, reason: String, error: String, sourceTopic: String,
        sourcePartition: Int32, sourceOffset: Int64, truncation: Truncation? = nil
    ) {
        self.original = original
        self.key = key
        self.reason = reason
        self.error = error
        self.sourceTopic = sourceTopic
        self.sourcePartition = sourcePartition
        self.sourceOffset = sourceOffset
        self.truncation = truncation
    }

    /// This dead letter with its value cut to its first `valueBytes` bytes, and its key to its first `keyBytes`
    /// (whole when nil), naming the whole value's size and digest. Cutting one already cut keeps what it names of the
    /// original.
    public func truncated(valueBytes: Int, keyBytes: Int? = nil) -> DeadLetter {
        var letter = self
        let previous = truncation
        let keyCut = keyBytes.flatMap { limit in key.map { $0.count > max(0, limit) } } ?? false
        letter.truncation = Truncation(
            originalBytes: previous?.originalBytes ?? original.count,
            originalSHA256: previous?.originalSHA256 ?? sha256Hex(original),
            originalKeyBytes: previous?.originalKeyBytes ?? (keyCut ? key?.count : nil))
        letter.original = Array(original.prefix(max(0, valueBytes)))
        if keyCut, let key, let keyBytes { letter.key = Array(key.prefix(max(0, keyBytes))) }
        return letter
    }

    /// Header names, shared with tools that read the dead-letter topic.
    public enum Header {
        public static let reason = "dlq.reason"
        public static let error = "dlq.error"
        public static let topic = "dlq.source.topic"
        public static let partition = "dlq.source.partition"
        public static let offset = "dlq.source.offset"
        public static let schema = "dlq.schema"
        /// `true` on a dead letter whose value (or key) was cut to fit in one record.
        public static let truncated = "dlq.truncated"
        /// The whole rejected value's size in bytes, decimal (truncated dead letters only).
        public static let originalBytes = "dlq.original_bytes"
        /// The whole rejected value's SHA-256, lowercase hexadecimal (truncated dead letters only).
        public static let originalSHA256 = "dlq.original_sha256"
        /// The whole key's size in bytes, decimal (only when the key was cut too).
        public static let originalKeyBytes = "dlq.original_key_bytes"
    }

    /// The schema tag of the header set.
    public static let schema = "receipt-dead-letter/v1"

    /// The Kafka headers that carry the rejection.
    public var headers: [(name: String, value: [UInt8])] {
        var headers = [
            (Header.schema, Array(Self.schema.utf8)),
            (Header.reason, Array(reason.utf8)),
            (Header.error, Array(error.utf8)),
            (Header.topic, Array(sourceTopic.utf8)),
            (Header.partition, Array(String(sourcePartition).utf8)),
            (Header.offset, Array(String(sourceOffset).utf8)),
        ]
        if let truncation {
            headers.append((Header.truncated, Array("true".utf8)))
            headers.append((Header.originalBytes, Array(String(truncation.originalBytes).utf8)))
            headers.append((Header.originalSHA256, Array(truncation.originalSHA256.utf8)))
            if let keyBytes = truncation.originalKeyBytes {
                headers.append((Header.originalKeyBytes, Array(String(keyBytes).utf8)))
            }
        }
        return headers
    }

    /// Reads a dead letter back from a record's key, value and headers; nil if the headers are not a dead letter's.
    public init?(key: [UInt8]?, value: [UInt8], headers: [(name: String, value: [UInt8])]) {
        func header(_ name: String) -> String? {
            headers.last(where: { $0.name == name }).map { String(decoding: $0.value, as: UTF8.self) }
        }
        guard let reason = header(Header.reason), let topic = header(Header.topic),
            let partition = header(Header.partition).flatMap({ Int32($0) }),
            let offset = header(Header.offset).flatMap({ Int64($0) })
        else { return nil }
        var truncation: Truncation?
        if header(Header.truncated) == "true", let bytes = header(Header.originalBytes).flatMap({ Int($0) }),
            let digest = header(Header.originalSHA256)
        {
            truncation = Truncation(
                originalBytes: bytes, originalSHA256: digest,
                originalKeyBytes: header(Header.originalKeyBytes).flatMap { Int($0) })
        }
        self.init(
            original: value, key: key, reason: reason, error: header(Header.error) ?? "", sourceTopic: topic,
            sourcePartition: partition, sourceOffset: offset, truncation: truncation)
    }

    /// Whether `bytes` are the rejected value this dead letter stands for: its value itself, or, when truncated, a
    /// value of the size and SHA-256 digest it names.
    func standsFor(_ bytes: [UInt8]) -> Bool {
        guard let truncation else { return bytes == original }
        return bytes.count == truncation.originalBytes && sha256Hex(bytes) == truncation.originalSHA256
    }

    /// Builds the dead letter for a message the codec refused.
    public init(
        rejecting original: [UInt8], key: [UInt8]?, error: MessageError, topic: String, partition: Int32,
        offset: Int64
    ) {
        self.init(
            original: original, key: key, reason: error.code.rawValue, error: error.description, sourceTopic: topic,
            sourcePartition: partition, sourceOffset: offset)
    }
}
