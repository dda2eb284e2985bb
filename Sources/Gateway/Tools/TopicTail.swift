import Foundation
import Kafka
import Logging

/// The logic of `verify-worker tail`: prints the values of a topic (verdicts by default) as JSON lines.
///
/// A value that is one line of JSON (as every message of the contract is) is printed as it is; anything else is
/// printed as `{"partition", "offset", "value_base64"}` so that the output stays one JSON value per line. With
/// `showsHeaders` (the dead-letter topic, whose rejection reasons travel in headers) every message is printed as
/// `{"partition", "offset", "headers": {name: value}, "value"}` (`value_base64` for bytes that are not UTF-8).
public struct TopicTail: Sendable {
    public var consumer: KafkaConsumerConfiguration
    public var topic: String
    /// Stop after this many messages; nil runs until `stop` returns or the consumer ends.
    public var count: Int?
    /// Commit each printed message (when the caller named a group, so a later tail resumes after it).
    public var commits: Bool
    /// Print each message's headers with it (see the type's documentation).
    public var showsHeaders: Bool
    public var output: @Sendable (String) -> Void

    public init(
        consumer: KafkaConsumerConfiguration, topic: String, count: Int? = nil, commits: Bool = false,
        showsHeaders: Bool = false, output: @escaping @Sendable (String) -> Void
    ) {
        self.consumer = consumer
        self.topic = topic
        self.count = count
        self.commits = commits
        self.showsHeaders = showsHeaders
        self.output = output
    }

    /// A group id of its own for a tail that named none (nothing is committed under it).
    public static func ephemeralGroupID() -> String {
        "verify-worker-tail-" + UUID().uuidString.prefix(8).lowercased()
    }

    /// Prints messages until `count` is reached or `stop` returns; returns how many were printed.
    public func run(
        logger: Logger, until stop: @escaping @Sendable () async -> Void
    ) async throws -> Int {
        let kafka = try KafkaConsumer(configuration: consumer, logger: logger)
        try kafka.subscribe(topics: [topic])
        let stopper = Task {
            await stop()
            await kafka.close()
        }
        defer { stopper.cancel() }
        var printed = 0
        do {
            for try await event in kafka.events {
                guard case .message(let message) = event else { continue }
                output(showsHeaders ? Self.lineWithHeaders(for: message) : Self.line(for: message))
                printed += 1
                if commits { try? kafka.commitAsync([message.nextOffset]) }
                if let count, printed >= count { break }
            }
        } catch {
            await kafka.close()
            throw error
        }
        await kafka.close()
        return printed
    }

    /// The output line for one message with its headers: dead letters say why in headers, not in the value.
    static func lineWithHeaders(for message: KafkaConsumerMessage) -> String {
        let value = message.value ?? []
        var headers: [String: String] = [:]
        for header in message.headers {
            let bytes = header.value ?? []
            headers[header.name] = String(validating: bytes, as: UTF8.self) ?? Data(bytes).base64EncodedString()
        }
        var object: [String: TailField] = [
            "partition": .scalar(.int(Int(message.partition))), "offset": .scalar(.int(Int(message.offset))),
            "headers": .headers(headers),
        ]
        if let text = String(validating: value, as: UTF8.self) {
            object["value"] = .scalar(.string(text))
        } else {
            object["value_base64"] = .scalar(.string(Data(value).base64EncodedString()))
        }
        return GatewayJSON.line(object)
    }

    /// A member of a tail line: a scalar or the headers object.
    enum TailField: Encodable {
        case scalar(JSONScalar)
        case headers([String: String])

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .scalar(let scalar): try scalar.encode(to: encoder)
            case .headers(let headers): try headers.encode(to: encoder)
            }
        }
    }

    /// The output line for one message.
    static func line(for message: KafkaConsumerMessage) -> String {
        let value = message.value ?? []
        if !value.isEmpty, !value.contains(0x0A), !value.contains(0x0D),
            let text = String(validating: value, as: UTF8.self),
            (try? JSONSerialization.jsonObject(with: Data(value), options: [.fragmentsAllowed])) != nil
        {
            return text
        }
        return GatewayJSON.line([
            "partition": JSONScalar.int(Int(message.partition)), "offset": .int(Int(message.offset)),
            "value_base64": .string(Data(value).base64EncodedString()),
        ])
    }
}
