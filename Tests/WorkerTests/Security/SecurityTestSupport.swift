import AppleClients
import Foundation
import Logging
import StoreHTTP
import Synchronization
import Traffic

/// Every log record of a logger, rendered as one line (level, message, metadata, source), for the checks that no
/// secret, key or receipt is ever logged.
final class SecurityLogCapture: Sendable {
    private let stored = Mutex<[String]>([])

    var lines: [String] { stored.withLock { $0 } }

    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { label in
            RecordingLogHandler { event, metadata in
                self.append("\(label) \(event.level) \(event.message) \(metadata) \(event.source)")
            }
        }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ line: String) { stored.withLock { $0.append(line) } }

    /// The lines that contain any of `needles` (each needle named, never printed whole).
    func leaks(of needles: [(name: String, value: String)]) -> [String] {
        lines.flatMap { line in
            needles.filter { !$0.value.isEmpty && line.contains($0.value) }.map { "\($0.name) in: \(line.prefix(160))" }
        }
    }
}

/// An HTTP transport that answers every request itself and records where each one went.
final class SecuritySpyTransport: HTTPTransport {
    private let urls = Mutex<[String]>([])
    let answer: @Sendable (TransportRequest) -> TransportResponse

    init(answer: @escaping @Sendable (TransportRequest) -> TransportResponse) {
        self.answer = answer
    }

    var requested: [String] { urls.withLock { $0 } }

    func execute(_ request: TransportRequest) async throws -> TransportResponse {
        urls.withLock { $0.append(request.url) }
        return answer(request)
    }
}
