import CodedErrors
import Entitlements
import Foundation
import Logging
import PostgresNIO
import PostgresSettings
import Testing

@testable import Ledger

/// `sslmode` as libpq defines it, for the ledger and the entitlement store alike: `verify-ca` checks the server's
/// certificate chain against `sslrootcert`, `verify-full` its host name too; a refused certificate is a setting to
/// fix, said at once, not a server retried as if it were down.
@Suite("Ledger: sslmode, sslrootcert and the database's certificate")
struct LedgerTLSTests {
    static let logger: Logger = {
        var logger = Logger(label: "ledger-tls-test")
        logger.logLevel = .critical
        return logger
    }()

    /// A PEM file holding one certificate (openssl's, made for the test).
    static func caFile() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ledger-tls-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("ca.pem").path
        let done = Process()
        done.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        done.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=ledger tls test",
            "-keyout", directory.appendingPathComponent("ca.key").path, "-out", path,
        ]
        done.standardError = FileHandle.nullDevice
        done.standardOutput = FileHandle.nullDevice
        try done.run()
        done.waitUntilExit()
        return path
    }

    @Test("the five modes of libpq are read, each into the TLS check it names; both URLs accept the same")
    func modes() throws {
        let ca = try Self.caFile()
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: ca).deletingLastPathComponent().path) }
        let base = "postgres://verify@db.example:5433/ledger"
        func read(_ query: String) throws -> PostgresURL { try PostgresURL(base + query, noun: "ledger URL") }

        #expect(try read("?sslmode=disable").tlsConfiguration == nil)
        #expect(try read("").sslMode == "prefer")
        let full = try #require(try read("?sslmode=verify-full&sslrootcert=\(ca)").tlsConfiguration)
        #expect(full.certificateVerification == .fullVerification)
        #expect(full.trustRoots != nil && full.trustRoots != NIOSSLTrustRoots.default)
        let chainOnly = try #require(try read("?sslmode=verify-ca&sslrootcert=\(ca)").tlsConfiguration)
        #expect(chainOnly.certificateVerification == .noHostnameVerification)
        #expect(chainOnly.trustRoots != nil && chainOnly.trustRoots != NIOSSLTrustRoots.default)
        // Without a CA file, verify-full trusts the system's CAs.
        let system = try #require(try read("?sslmode=verify-full").tlsConfiguration)
        #expect(system.certificateVerification == .fullVerification)
        #expect(system.trustRoots == nil || system.trustRoots == NIOSSLTrustRoots.default)

        for query in [
            "?sslmode=verify-full&sslrootcert=\(ca)", "?sslmode=verify-ca&sslrootcert=\(ca)&schema=s1",
            "?sslmode=require", "?sslmode=disable",
        ] {
            _ = try PostgresLedger(url: base + query, logger: Self.logger)
            _ = try PostgresEntitlementStore(url: base + query, logger: Self.logger)
        }
    }

    @Test(
        "a mode libpq lacks, or a CA file missing or not PEM, is refused at once naming what is wrong",
        arguments: [
            ("?sslmode=verify", "sslmode verify is not one of disable, prefer, require, verify-ca, verify-full"),
            ("?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", "sslrootcert /nonexistent/ca.pem"),
            ("?sslmode=verify-ca&sslrootcert=", "sslrootcert needs"),
            ("?sslmode=verify-ca&sslrootcert=/etc/hostname", "sslrootcert /etc/hostname"),
        ])
    func refused(query: String, expected: String) throws {
        let url = "postgres://verify:pw-not-shown@db.example/ledger" + query
        #expect {
            _ = try PostgresLedger(url: url, logger: Self.logger)
        } throws: { error in
            guard let error = error as? LedgerError else { return false }
            return error.code == .invalidConfiguration && error.message.contains(expected)
                && !error.description.contains("pw-not-shown")
        }
        #expect {
            _ = try PostgresEntitlementStore(url: url, logger: Self.logger)
        } throws: { error in
            guard let error = error as? EntitlementStoreError else { return false }
            return error.code == .invalidConfiguration && "\(error)".contains(expected)
        }
    }

    @Test(
        "a real PostgreSQL with TLS: verify-full with its CA connects; another CA or a name not in its certificate is refused at once; verify-ca connects there",
        .timeLimit(.minutes(3)))
    func realServer() async throws {
        try await LedgerTestSupport.withPrivatePostgres(tls: true) { url, control in
            let tls = try await LedgerTestSupport.shell("\(control) tls-dir").trimmingCharacters(
                in: .whitespacesAndNewlines)
            let ca = tls + "/ca.pem"
            let other = tls + "/other-ca.pem"
            func with(host: String = "127.0.0.1", _ query: String) -> String {
                url.replacingOccurrences(of: "?sslmode=disable", with: "?" + query)
                    .replacingOccurrences(of: "@127.0.0.1:", with: "@\(host):")
            }
            let configuration = LedgerConfiguration(operationTimeout: .seconds(60), connectTimeout: .seconds(20))

            // The right CA: the ledger migrates and answers, and so does the entitlement store.
            let versions = try await LedgerFactory.withLedger(
                url: with("sslmode=verify-full&sslrootcert=\(ca)"), configuration: configuration, logger: Self.logger
            ) { try await $0.schemaVersions() }
            #expect(!versions.isEmpty)
            let store = try PostgresEntitlementStore(
                url: with("sslmode=verify-full&sslrootcert=\(ca)&schema=ent_tls"), logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                try await store.migrate()
            }

            // Refused: another CA, or an address the certificate does not name. Said once, as a setting to fix,
            // well before the 20 s a server that is down would take.
            for refusedURL in [
                with("sslmode=verify-full&sslrootcert=\(other)"),
                with("sslmode=verify-ca&sslrootcert=\(other)"),
                with(host: "127.0.0.2", "sslmode=verify-full&sslrootcert=\(ca)"),
            ] {
                let ledger = try PostgresLedger(url: refusedURL, configuration: configuration, logger: Self.logger)
                let started = ContinuousClock.now
                await #expect {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { try await ledger.run() }
                        defer { group.cancelAll() }
                        try await ledger.migrate()
                    }
                } throws: { error in
                    guard let error = error as? LedgerError else { return false }
                    return error.code == .invalidConfiguration && !error.isRetryable
                        && error.message.contains("TLS refused the server's certificate")
                }
                #expect(ContinuousClock.now - started < .seconds(15), "\(refusedURL)")
            }

            // verify-ca does not check the name: the address the certificate lacks is accepted.
            let chainOnly = try await LedgerFactory.withLedger(
                url: with(host: "127.0.0.2", "sslmode=verify-ca&sslrootcert=\(ca)"), configuration: configuration,
                logger: Self.logger
            ) { try await $0.schemaVersions() }
            #expect(chainOnly == versions)
        }
    }
}
