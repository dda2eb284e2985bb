import Foundation
import Logging
import Observability
import Operations

/// The bearer tokens `POST /v1/receipts` accepts (`Authorization: Bearer <token>`), read once at start from the
/// file named by `VERIFY_GATEWAY_TOKENS_FILE`, in the format of every tokens file (``AccessTokens``: one token per
/// line, optionally `label:token`, 24 to 512 printable ASCII characters).
///
/// The gateway's former format is still read, with one deprecation notice: one bare token per line, 16 characters or
/// more, no spaces or control characters. A file that the documented format refuses and the former one accepts is
/// read as the former; a file neither accepts is refused with the documented format's error.
public struct BearerTokens: Sendable {
    /// The shortest token of the former format: a short token can be guessed.
    public static let minimumLength = 16

    private let tokens: AccessTokens
    /// Whether the file was in the gateway's former format.
    public let isFormerFormat: Bool

    /// How many tokens are accepted.
    public var count: Int { tokens.count }

    /// The former format's tokens, by line.
    /// - Throws: ``ConfigurationError`` naming `gateway_tokens_file` when a token is too short or holds a space, or
    ///   when there is none. The message gives the line number, never the token.
    init(formerFormat tokens: [(line: Int, token: String)]) throws(ConfigurationError) {
        var labelled: [(label: String, token: String)] = []
        for (line, token) in tokens {
            guard token.utf8.count >= Self.minimumLength else {
                throw ConfigurationError(
                    key: "gateway_tokens_file",
                    problem: "line \(line): a token must have at least \(Self.minimumLength) characters")
            }
            guard !token.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 }) else {
                throw ConfigurationError(
                    key: "gateway_tokens_file",
                    problem: "line \(line): a token must not contain spaces or control characters")
            }
            labelled.append(("token-\(line)", token))
        }
        guard !labelled.isEmpty else {
            throw ConfigurationError(key: "gateway_tokens_file", problem: "the file holds no token")
        }
        self.tokens = AccessTokens(labelled: labelled)
        self.isFormerFormat = true
    }

    /// Parses the file in the documented format, else in the former one.
    public init(fileContents: String) throws(ConfigurationError) {
        let documented: AccessTokens
        do {
            documented = try AccessTokens(contents: fileContents)
        } catch {
            do {
                self = try BearerTokens(formerFormat: Self.formerLines(fileContents))
                return
            } catch _ {
                throw ConfigurationError(key: "gateway_tokens_file", problem: error.description)
            }
        }
        // The former format took a whole line as the token: a former file whose tokens hold a colon also reads as
        // labelled lines. Those whole lines stay accepted (knowing one means knowing its token), so no frontend
        // loses access when the file is read in the documented format.
        let colonLines = Self.formerLines(fileContents).filter { $0.token.contains(":") }
        if !colonLines.isEmpty, let whole = try? BearerTokens(formerFormat: colonLines) {
            self.tokens = documented.adding(whole.tokens)
        } else {
            self.tokens = documented
        }
        self.isFormerFormat = false
    }

    /// The former format's lines: `#` starts a comment line; blank lines are ignored; spaces around a token dropped.
    private static func formerLines(_ contents: String) -> [(line: Int, token: String)] {
        // `\r\n` is one Character in Swift: split on every newline, not on "\n" alone.
        let lines = contents.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        return lines.enumerated().compactMap { index, raw in
            let line = raw.trimmingCharacters(in: .whitespaces)
            return line.isEmpty || line.hasPrefix("#") ? nil : (index + 1, line)
        }
    }

    /// Reads the tokens file. An unreadable, empty or bad file is one error naming `gateway_tokens_file`. A file in
    /// the former format is read, and `logger` says once that it is deprecated (naming the file, never a token).
    public static func load(
        path: String, readFile: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) },
        logger: Logger? = nil
    ) throws(ConfigurationError) -> BearerTokens {
        let contents = try ConfigurationFile.read(path, key: "gateway_tokens_file", with: readFile)
        let tokens = try BearerTokens(fileContents: contents)
        if tokens.isFormerFormat {
            logger?.notice(
                """
                gateway: the tokens file is in the gateway's former format (one bare token per line); it is still \
                read, but write it as every tokens file is (label:token lines, tokens of 24 to 512 printable ASCII \
                characters; docs/CONFIGURATION.md)
                """,
                metadata: [LogKeys.configurationFile: "\(path)"])
        }
        return tokens
    }

    /// Whether `token` is one of the accepted tokens, in time that depends on neither where it differs nor which
    /// token it matches.
    public func accepts(_ token: some StringProtocol) -> Bool { tokens.authenticate(String(token)) != nil }

    /// The token of an `Authorization` header value, `Bearer <token>` (the scheme is case-insensitive, RFC 6750);
    /// nil for another scheme or no token.
    public static func token(fromAuthorization value: String?) -> Substring? {
        guard let value else { return nil }
        let trimmed = value.drop { $0 == " " }
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        let token = trimmed.dropFirst(7).drop { $0 == " " }
        let end = token.lastIndex { $0 != " " }.map { token.index(after: $0) } ?? token.startIndex
        let result = token[..<end]
        return result.isEmpty ? nil : result
    }
}
