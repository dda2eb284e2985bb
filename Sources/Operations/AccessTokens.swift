import Crypto
import Foundation
import Messages

/// Bearer tokens, read from a tokens file: the entitlement API's and console's (`VERIFY_ENTITLEMENTS_TOKENS_FILE`)
/// and the gateway's `POST /v1/receipts` (`VERIFY_GATEWAY_TOKENS_FILE`), in one format: one token per line,
/// optionally labelled (`support-alice:TOKEN`), 24 to 512 printable ASCII characters; `#` starts a comment, blank
/// lines and spaces around a line are ignored. The label names the caller in logs and rate limits; the token itself
/// is never logged or kept: only its SHA-256 digest is held, and a presented token is compared with every digest in
/// constant time.
///
/// A line may end, after a space, with scopes that widen what its token may see: `support-alice:TOKEN support`.
/// The only scope is ``supportScope``: the entitlement API shows such a caller which account owns a purchase that
/// was replayed to another; every other caller is told only that another account owns it.
public struct AccessTokens: Sendable {
    struct Entry: Sendable {
        let label: String
        let digest: [UInt8]
        var scopes: Set<String> = []
    }

    /// The scope of support staff's tokens (``scopes(of:)``).
    public static let supportScope = "support"
    static let knownScopes: Set<String> = [supportScope]

    private let entries: [Entry]

    /// The shortest token accepted: a guessable token would make the bearer scheme pointless.
    public static let minimumLength = 24
    public static let maximumLength = 512

    public var count: Int { entries.count }
    public var labels: [String] { entries.map(\.label) }

    /// Parses the file's text. Throws a ``TokensFileError`` naming the line, never quoting a token.
    public init(contents: String) throws(TokensFileError) {
        var entries: [Entry] = []
        // `\r\n` is one Character in Swift: split on every newline, not on "\n" alone.
        let lines = contents.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for (index, rawLine) in lines.enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            var label = "token-\(index + 1)"
            var rest = line
            if let colon = line.firstIndex(of: ":") {
                label = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
                rest = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                guard Identifier.isValid(label), label.count <= 64, !label.contains(" ") else {
                    throw TokensFileError(line: index + 1, "the label must be 1 to 64 characters without spaces")
                }
            }
            let words = rest.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            let token = words.first ?? ""
            let scopes = Set(words.dropFirst())
            // The word is not quoted: it may be the second half of a token written with a space.
            guard scopes.isSubset(of: Self.knownScopes) else {
                throw TokensFileError(
                    line: index + 1,
                    "after the token, only scopes may follow (\(Self.knownScopes.sorted().joined(separator: ", ")))")
            }
            guard token.utf8.count >= Self.minimumLength, token.utf8.count <= Self.maximumLength,
                token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else {
                throw TokensFileError(
                    line: index + 1,
                    "a token must be \(Self.minimumLength) to \(Self.maximumLength) printable ASCII characters without spaces"
                )
            }
            guard !entries.contains(where: { $0.label == label }) else {
                throw TokensFileError(line: index + 1, "the label \(label) is used twice")
            }
            entries.append(Entry(label: label, digest: Array(SHA256.hash(data: Array(token.utf8))), scopes: scopes))
        }
        guard !entries.isEmpty else { throw TokensFileError(line: 0, "the file holds no token") }
        self.entries = entries
    }

    /// Tokens read from another format (the gateway's former one): the reader of that format checked them.
    public init(labelled tokens: [(label: String, token: String)]) {
        entries = tokens.map { Entry(label: $0.label, digest: Array(SHA256.hash(data: Array($0.token.utf8)))) }
    }

    private init(entries: [Entry]) { self.entries = entries }

    /// These tokens and `other`'s.
    public func adding(_ other: AccessTokens) -> AccessTokens { AccessTokens(entries: entries + other.entries) }

    /// The scopes of the token labelled `label` (labels are unique in a file).
    public func scopes(of label: String) -> Set<String> { entries.first { $0.label == label }?.scopes ?? [] }

    /// The label of the token, or nil. Every stored digest is compared, whole, whatever matches: the time taken
    /// does not depend on which token (or how much of one) was right.
    public func authenticate(_ presented: String) -> String? {
        let digest = Array(SHA256.hash(data: Array(presented.utf8)))
        var match: Int = -1
        for (index, entry) in entries.enumerated() {
            // Branch-free select: `equal` is all ones when the digests are equal.
            let equal = Int(bitPattern: UInt(Self.constantTimeEqual(digest, entry.digest) ? 1 : 0)) &* -1
            match = (match & ~equal) | (index & equal)
        }
        return match >= 0 ? entries[match].label : nil
    }

    /// Equality of two byte strings that looks at every byte of both whatever they hold (lengths are not secret:
    /// both are digests).
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// The token in an `Authorization: Bearer …` header, or nil.
    public static func bearerToken(in header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty || token.utf8.count > maximumLength ? nil : token
    }
}

/// A tokens file that cannot be used: the line and the problem (never a token).
public struct TokensFileError: Error, Sendable, CustomStringConvertible {
    public var line: Int
    public var problem: String
    public init(line: Int, _ problem: String) {
        self.line = line
        self.problem = problem
    }
    public var description: String { line > 0 ? "line \(line): \(problem)" : problem }
}
