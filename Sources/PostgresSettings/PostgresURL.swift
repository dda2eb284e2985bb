import Foundation
import Logging
import PostgresNIO

/// A `postgres://user[:password]@host[:port]/database[?sslmode=…][&sslrootcert=PATH][&schema=NAME]` URL read into
/// postgres-nio's client configuration: the one reading of such a URL for the ledger and the entitlement store, so
/// that both accept the same spellings.
///
/// `sslmode` follows libpq: `disable` (no TLS), `prefer` (TLS when the server offers it), `require` (TLS or no
/// connection), `verify-ca` (TLS, and the server's certificate chain must lead to a trusted CA; its host name is not
/// checked) and `verify-full` (the chain, and the host name or IP address of the URL must be in the certificate).
/// `sslrootcert=PATH` names a PEM file of the CAs to trust; without it `verify-ca` and `verify-full` trust the
/// system's CAs. As in libpq, a CA file given with `prefer` or `require` makes them check the chain (as
/// `verify-ca`). A CA file that is missing, unreadable or holds no certificate is refused here, at start.
public struct PostgresURL: Sendable {
    /// The TLS modes of libpq this reading accepts, in the order error messages list them.
    public static let sslModes = ["disable", "prefer", "require", "verify-ca", "verify-full"]

    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    /// `schema=`: the schema holding the tables; nil for the user's default search path.
    public var schema: String?
    /// `sslmode=` (default `prefer`, as libpq).
    public var sslMode: String
    /// `sslrootcert=`: the CA file, when one is named.
    public var rootCertificatePath: String?
    /// The TLS setting for postgres-nio, with the CA file already read.
    public var tls: PostgresClient.Configuration.TLS
    /// The TLS configuration behind ``tls`` (nil for `disable`).
    public var tlsConfiguration: TLSConfiguration?

    /// Why a URL cannot be used; `message` names the part at fault, never the password.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Reads `url`; `noun` names it in problems (`ledger URL`, `store URL`).
    public init(
        _ url: String, noun: String,
        readCertificates: (String) throws -> [NIOSSLCertificate] = { try NIOSSLCertificate.fromPEMFile($0) }
    ) throws(Problem) {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw Problem(message: "\(noun) is not postgres://user@host[:port]/database")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard let user = components.user, !user.isEmpty, !database.isEmpty else {
            throw Problem(message: "\(noun) needs a user and a database: postgres://user@host/database")
        }
        func query(_ name: String) -> String? { components.queryItems?.first(where: { $0.name == name })?.value }
        let schema = query("schema")
        if let schema {
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_")
            guard !schema.isEmpty, schema.count <= 63, schema.allSatisfy({ allowed.contains($0) }) else {
                throw Problem(message: "schema must be 1-63 characters of a-z, 0-9 and _")
            }
        }
        let sslMode = query("sslmode") ?? "prefer"
        guard Self.sslModes.contains(sslMode) else {
            throw Problem(message: "sslmode \(sslMode) is not one of \(Self.sslModes.joined(separator: ", "))")
        }
        let rootCertificatePath = query("sslrootcert")
        var trustRoots: NIOSSLTrustRoots?
        if let path = rootCertificatePath, sslMode != "disable" {
            guard !path.isEmpty else { throw Problem(message: "sslrootcert needs the path of a PEM file of CAs") }
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try readCertificates(path)
            } catch {
                throw Problem(message: "sslrootcert \(path): cannot read a PEM certificate from the file")
            }
            guard !certificates.isEmpty else {
                throw Problem(message: "sslrootcert \(path): the file holds no PEM certificate")
            }
            trustRoots = .certificates(certificates)
        }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let trustRoots { configuration.trustRoots = trustRoots }
        switch sslMode {
        case "disable":
            tls = .disable
        case "prefer", "require":
            // Unchanged without a CA file; with one, libpq checks the chain (not the name).
            if trustRoots != nil { configuration.certificateVerification = .noHostnameVerification }
            tls = sslMode == "prefer" ? .prefer(configuration) : .require(configuration)
        case "verify-ca":
            configuration.certificateVerification = .noHostnameVerification
            tls = .require(configuration)
        default:
            configuration.certificateVerification = .fullVerification
            tls = .require(configuration)
        }
        if sslMode != "disable" { tlsConfiguration = configuration }
        self.host = host
        self.port = components.port ?? 5432
        self.user = user
        self.password = components.password
        self.database = database
        self.schema = schema
        self.sslMode = sslMode
        self.rootCertificatePath = rootCertificatePath
    }

    /// The database named, for logs (never the password).
    public var target: String { "\(host):\(port)/\(database)" }

    /// Whether the certificate is checked against trusted CAs (`verify-ca`, `verify-full`, or a CA file).
    public var verifiesCertificate: Bool {
        sslMode == "verify-ca" || sslMode == "verify-full" || (sslMode != "disable" && rootCertificatePath != nil)
    }

    /// For a URL that verifies the server's certificate: connects once, outside any pool, and returns why TLS refused
    /// the server (its certificate does not lead to a trusted CA, or does not name the host), or nil when it did not.
    /// A pool retries a failed connection as if the server were down, which hides a refusal that no retry will
    /// change; this tells it apart at start. Other failures (no server, authentication) are left to the pool.
    public func certificateRefusal(connectTimeout: Duration, logger: Logger) async -> String? {
        guard verifiesCertificate, let tlsConfiguration else { return nil }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tlsConfiguration)
        } catch {
            return "the TLS settings cannot be used: \(error)"
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: .require(context))
        configuration.options.connectTimeout = .nanoseconds(
            connectTimeout.components.seconds * 1_000_000_000 + connectTimeout.components.attoseconds / 1_000_000_000)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            try? await connection.close()
            return nil
        } catch {
            return Self.tlsRefusal(in: error)
        }
    }

    /// The TLS failure inside a connection error, described; nil when the error is not one.
    static func tlsRefusal(in error: any Error) -> String? {
        var current: (any Error)? = error
        while let error = current {
            if error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError { return "\(error)" }
            current = (error as? PSQLError)?.underlying
        }
        return nil
    }

    /// postgres-nio's client configuration for this URL (pool and startup options are the caller's).
    /// The pool's configuration of a store: at most `maximumConnections`, none kept idle, `connectTimeout` per
    /// connection attempt, and the server told to end a statement or a lock wait at `operationTimeout` (the store's
    /// own deadline ends the call at the same time) and to use the URL's schema.
    public func clientConfiguration(
        connectTimeout: Duration, maximumConnections: Int, operationTimeout: Duration, applicationName: String
    ) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = connectTimeout
        configuration.options.maximumConnections = max(1, maximumConnections)
        configuration.options.minimumConnections = 0
        let milliseconds =
            operationTimeout.components.seconds * 1000 + operationTimeout.components.attoseconds / 1_000_000_000_000_000
        configuration.options.additionalStartupParameters = [
            ("statement_timeout", "\(max(1, milliseconds))"),
            ("lock_timeout", "\(max(1, milliseconds))"),
            ("application_name", applicationName),
        ]
        if let schema { configuration.options.additionalStartupParameters.append(("search_path", schema)) }
        return configuration
    }
}
