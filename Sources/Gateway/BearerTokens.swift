import Crypto
import Foundation

/// The bearer tokens `POST /v1/receipts` accepts (`Authorization: Bearer <token>`), read once at start from the
/// file named by `VERIFY_GATEWAY_TOKENS_FILE`: one token per line, `#` comments and blank lines ignored.
///
/// Only the SHA-256 digest of each token is kept, and a presented token is compared with every digest over all
/// their bytes: the time an answer takes says nothing about how much of a token matched, or which one.
public struct BearerTokens: Sendable {
    /// Shorter tokens are refused at start: a short token can be guessed.
    public static let minimumLength = 16

    private let digests: [[UInt8]]

    /// How many tokens are accepted.
    public var count: Int { digests.count }

    /// - Throws: ``GatewayConfigurationError`` naming `gateway_tokens_file` when a token is too short or holds
    ///   a space, or when there is none. The message gives the line number, never the token.
    public init(tokens: [(line: Int, token: String)]) throws(GatewayConfigurationError) {
        var digests: [[UInt8]] = []
        for (line, token) in tokens {
            guard token.utf8.count >= Self.minimumLength else {
                throw GatewayConfigurationError(
                    key: "gateway_tokens_file",
                    "line \(line): a token must have at least \(Self.minimumLength) characters")
            }
            guard !token.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 }) else {
                throw GatewayConfigurationError(
                    key: "gateway_tokens_file", "line \(line): a token must not contain spaces or control characters")
            }
            digests.append(Array(SHA256.hash(data: Array(token.utf8))))
        }
        guard !digests.isEmpty else {
            throw GatewayConfigurationError(key: "gateway_tokens_file", "the file holds no token")
        }
        self.digests = digests
    }

    /// Parses the file format: one token per line; `#` starts a comment line; blank lines are ignored; spaces
    /// around a token are dropped.
    public init(fileContents: String) throws(GatewayConfigurationError) {
        var tokens: [(line: Int, token: String)] = []
        // `\r\n` is one Character in Swift: split on every newline, not on "\n" alone.
        let lines = fileContents.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, raw) in lines.enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            tokens.append((index + 1, line))
        }
        try self.init(tokens: tokens)
    }

    /// Reads the tokens file. An unreadable, empty or bad file is one error naming `gateway_tokens_file`.
    public static func load(
        path: String, readFile: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(GatewayConfigurationError) -> BearerTokens {
        let contents: String
        do {
            contents = try readFile(path)
        } catch {
            throw GatewayConfigurationError(key: "gateway_tokens_file", "cannot read \(path)")
        }
        return try BearerTokens(fileContents: contents)
    }

    /// Whether `token` is one of the accepted tokens, in time that depends on neither where it differs nor which
    /// token it matches.
    public func accepts(_ token: some StringProtocol) -> Bool {
        let presented = Array(SHA256.hash(data: Array(token.utf8)))
        var matched = false
        for digest in digests {
            // Every digest is compared, also after a match.
            let equal = Self.constantTimeEqual(presented, digest)
            matched = matched || equal
        }
        return matched
    }

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

    /// Equality of two byte strings that looks at every byte of both whatever they hold (lengths are not secret:
    /// both are digests).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
