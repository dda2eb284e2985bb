import Foundation
import Glibc
import Logging
import PostgresSettings
import Synchronization
import Testing

/// What a store's PostgreSQL pool logs about the connections it opens: one the server drops is a failure, one the
/// pool gives up because it stops is not.
@Suite("PostgreSQL pool: connection attempts in the log", .timeLimit(.minutes(2)))
struct PostgresPoolStopLogTests {
    @Test(
        "a connection the server drops is logged as failed; one still being opened when the pool stops is not a failure"
    )
    func abandonedAttemptIsNoFailure() async throws {
        // The server drops the first connection at once and holds every later one without a word, so the pool's next
        // attempt is still waiting for the server's answer when the pool stops.
        let server = try SilentPostgresServer(droppingFirst: 1)
        defer { server.stop() }
        let log = PoolLogCapture()
        let pool = try PostgresPool(
            url: "postgres://verify@127.0.0.1:\(server.port)/ledger?sslmode=disable", noun: "ledger_url",
            storeName: "ledger", connectTimeout: .seconds(60), maximumConnections: 1, operationTimeout: .seconds(90),
            applicationName: "verify-worker-test", logger: log.logger)
        let running = Task { await pool.run() }
        let waiting = Task {
            try await pool.operation("probe", failure: { $0 }) { lease in try await lease.withConnection { _ in } }
        }
        await log.lines.wait { $0.contains { $0.hasPrefix("info Connection creation failed") } }
        await server.accepted.wait { $0 >= 2 }
        running.cancel()
        await running.value
        waiting.cancel()
        _ = await waiting.result

        let lines = log.lines.state
        let failures = lines.filter {
            $0.hasPrefix("error ") || $0.hasPrefix("critical ") || $0.contains("failed") || $0.contains("retrying")
        }
        #expect(failures.count == 1, "\(lines.joined(separator: "\n"))")
        // The one failure is the dropped connection's (closed or reset by the server), at info as PostgresNIO says it.
        #expect(
            failures.allSatisfy {
                $0.hasPrefix("info Connection creation failed") && !$0.contains("clientClosedConnection")
                    && !$0.contains("CancellationError")
            }, "\(failures)")
        #expect(
            lines.contains { $0.hasPrefix("debug PostgreSQL connection attempt given up: the pool is stopping") },
            "\(lines.joined(separator: "\n"))")
    }
}

/// Each log record as one line: level, message, metadata.
private final class PoolLogCapture: Sendable {
    let lines = KafkaTestProgress<[String]>([])

    var logger: Logger {
        let lines = self.lines
        var logger = Logger(label: "pool-log") { _ in
            RecordingLogHandler { event, metadata in
                lines.update { $0.append("\(event.level) \(event.message) \(metadata)") }
            }
        }
        logger.logLevel = .trace
        return logger
    }
}

/// A TCP listener on 127.0.0.1 that closes its first `droppingFirst` connections at once and holds the later ones open
/// without ever answering their start message: a PostgreSQL server that has not answered yet.
private final class SilentPostgresServer: Sendable {
    let port: Int
    /// Connections accepted so far (a held one once its first bytes arrived).
    let accepted = KafkaTestProgress(0)
    private let listener: Int32
    private let held = Mutex<[Int32]>([])

    init(droppingFirst dropped: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(listener, address, length) == 0 && listen(listener, 8) == 0
                    && getsockname(listener, address, &length) == 0
            }
        }
        guard listener >= 0, listening else {
            close(listener)
            throw KafkaTestFailure("the silent PostgreSQL server could not listen on 127.0.0.1")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            var count = 0
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                count += 1
                if count <= dropped {
                    close(connection)
                } else {
                    // Counted once the client's start message arrived: the client is then waiting for the answer.
                    held.withLock { $0.append(connection) }
                    var start = [UInt8](repeating: 0, count: 512)
                    guard recv(connection, &start, start.count, 0) > 0 else { return }
                }
                accepted.update { $0 = count }
            }
        }.start()
    }

    /// Stops accepting and closes the connections held.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        held.withLock { connections in
            connections.forEach { close($0) }
            connections = []
        }
    }
}
