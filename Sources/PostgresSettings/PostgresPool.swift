import Deadlines
import Logging
import PostgresNIO

/// A store's PostgreSQL connections (the ledger's, the entitlement store's): the pool configured from the store's URL
/// and timeouts, and the one way an operation of the store runs on it, within its deadlines.
///
/// ``run()`` runs the pool and must keep running while the store is used; an operation started without it fails at
/// its timeout, it never hangs.
public struct PostgresPool: Sendable {
    public let url: PostgresURL
    /// What the store's error details call it (`ledger`, `entitlement store`).
    public let storeName: String
    public let connectTimeout: Duration
    public let operationTimeout: Duration
    private let client: PostgresClient
    /// Connections leased so far, to tell a server that is down from a busy pool (see ``PostgresLease``).
    private let leasesGranted = LeaseCounter()

    /// Reads `url` (`noun` names it in a ``PostgresURL/Problem``) and configures the pool; connects only once
    /// ``run()`` runs.
    public init(
        url: String, noun: String, storeName: String, connectTimeout: Duration, maximumConnections: Int,
        operationTimeout: Duration, applicationName: String, logger: Logger
    ) throws(PostgresURL.Problem) {
        let url = try PostgresURL(url, noun: noun)
        self.url = url
        self.storeName = storeName
        self.connectTimeout = connectTimeout
        self.operationTimeout = operationTimeout
        client = PostgresClient(
            configuration: url.clientConfiguration(
                connectTimeout: connectTimeout, maximumConnections: maximumConnections,
                operationTimeout: operationTimeout, applicationName: applicationName),
            backgroundLogger: PostgresPoolLogHandler.wrapping(logger))
    }

    /// The database named by the URL, for logs (never the password).
    public var target: String { url.target }

    public func run() async { await client.run() }

    /// Why TLS refuses the server's certificate, as an error detail naming the settings to fix; nil when it does
    /// not. A refused certificate is a setting to fix, not a server that is down: said once at migration, not
    /// retried.
    public func certificateRefusal(logger: Logger) async -> String? {
        guard let refusal = await url.certificateRefusal(connectTimeout: connectTimeout, logger: logger) else {
            return nil
        }
        return "PostgreSQL at \(target): TLS refused the server's certificate (sslmode=\(url.sslMode)"
            + "\(url.rootCertificatePath.map { ", sslrootcert=\($0)" } ?? "")): \(refusal)"
    }

    /// Runs one operation of the store with its deadlines. No connection within ``connectTimeout`` while no other
    /// operation got one either (the server is down or unreachable: the pool keeps retrying in the background and
    /// would hold the request for up to a minute) is a ``PostgresFailure`` `unavailable`; the whole operation taking
    /// longer than ``operationTimeout`` one that is `timeout`. The store's own error and cancellation pass as they
    /// are; `failure` turns every other error (those two included) into the store's.
    public func operation<T: Sendable, Failure: Error>(
        _ what: String, failure: (any Error) -> Failure,
        _ body: @escaping @Sendable (PostgresLease) async throws -> T
    ) async throws -> T {
        let lease = PostgresLease(client: client, granted: leasesGranted)
        let (storeName, target, connectTimeout, operationTimeout) = (
            storeName, target, connectTimeout, operationTimeout
        )
        do {
            return try await withDeadline(
                operationTimeout,
                onTimeout: { PostgresFailure(.timeout, "\(storeName) \(what) took longer than \(operationTimeout)") },
                connect: (
                    connectTimeout, { !lease.starved },
                    {
                        PostgresFailure(
                            .unavailable,
                            "PostgreSQL \(what): no connection to \(target) within \(connectTimeout) "
                                + "(server down or unreachable)")
                    }
                )
            ) {
                try await body(lease)
            }
        } catch let error as Failure {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            throw failure(error)
        }
    }
}
