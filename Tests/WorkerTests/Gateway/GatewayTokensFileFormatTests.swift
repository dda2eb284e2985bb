import Foundation
import Gateway
import Logging
import Operations
import Synchronization
import Testing

/// The gateway's tokens file has the entitlement API's format (``AccessTokens``: one token per line, optionally
/// `label:token`); the gateway's former format (bare tokens of 16 characters or more) is still read, with one
/// deprecation notice.
@Suite("Gateway: one tokens file format with the entitlement API")
struct GatewayTokensFileFormatTests {
    static let alpha = "alpha-token-0123456789abcdef"
    static let beta = "beta-token-0123456789abcdef"
    /// 17 characters: enough for the former format, too short for the documented one.
    static let formerOnly = "former-token-0123"
    static let documented = "# frontends\nfrontend-a:\(alpha)\r\nfrontend-b:\(beta)\n"
    static let former = "# frontends\n\(alpha)\n\(beta)\n\(formerOnly)\n"

    /// The lines a logger writes, as JSON text.
    static func capturingLogger() -> (Logger, @Sendable () -> [String]) {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "gateway-test") { label in
            JSONLogHandler(label: label, level: .trace) { bytes in
                lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
            }
        }
        logger.logLevel = .trace
        return (logger, { lines.withLock { $0 } })
    }

    @Test("both formats load to the same tokens; the entitlement API reads the gateway's documented file")
    func sameTokens() throws {
        let fromDocumented = try BearerTokens(fileContents: Self.documented)
        let fromFormer = try BearerTokens(fileContents: Self.former)
        #expect(!fromDocumented.isFormerFormat && fromFormer.isFormerFormat)
        for tokens in [fromDocumented, fromFormer] {
            #expect(tokens.accepts(Self.alpha) && tokens.accepts(Self.beta))
            #expect(!tokens.accepts("gamma-token-0123456789abcdef") && !tokens.accepts("frontend-a"))
        }
        #expect(fromFormer.accepts(Self.formerOnly) && !fromDocumented.accepts(Self.formerOnly))
        let api = try AccessTokens(contents: Self.documented)
        #expect(api.labels == ["frontend-a", "frontend-b"])
        #expect(api.authenticate(Self.alpha) == "frontend-a" && api.authenticate(Self.beta) == "frontend-b")
    }

    @Test("a former token holding a colon stays accepted whole, and its labelled reading works too")
    func formerTokenWithColon() throws {
        let line = "team:shared-secret-0123456789abcdef"
        let tokens = try BearerTokens(fileContents: line + "\n")
        #expect(!tokens.isFormerFormat)
        #expect(tokens.accepts(line) && tokens.accepts("shared-secret-0123456789abcdef"))
    }

    @Test("the deprecation line: once for the former format, naming the file and no token; never for the documented")
    func deprecationLine() throws {
        let (formerLogger, formerLines) = Self.capturingLogger()
        _ = try BearerTokens.load(
            path: "/run/secrets/gateway_tokens", readFile: { _ in Self.former }, logger: formerLogger)
        let lines = formerLines()
        #expect(lines.count == 1)
        #expect(lines.first?.contains("\"level\":\"notice\"") == true)
        #expect(lines.first?.contains("/run/secrets/gateway_tokens") == true)
        for token in [Self.alpha, Self.beta, Self.formerOnly] {
            #expect(lines.first?.contains(token) == false)
        }
        let (documentedLogger, documentedLines) = Self.capturingLogger()
        _ = try BearerTokens.load(
            path: "/run/secrets/gateway_tokens", readFile: { _ in Self.documented }, logger: documentedLogger)
        #expect(documentedLines().isEmpty)
    }

    @Test("a file neither format reads: one configuration error line naming the key and the line, never the token")
    func malformed() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try BearerTokens.load(
                path: "/run/tokens", readFile: { _ in "frontend-a:\(Self.alpha)\nno spaces in tokens 0123\n" })
        }
        #expect(error?.key == "gateway_tokens_file")
        let text = error?.description ?? ""
        #expect(text.hasPrefix("configuration: gateway_tokens_file: line 2: "))
        #expect(!text.contains("\n") && !text.contains("no spaces") && !text.contains(Self.alpha))
    }
}
