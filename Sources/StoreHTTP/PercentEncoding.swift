import Foundation

extension String {
    /// The text with everything but RFC 3986's unreserved characters (letters, digits, `-`, `.`, `_`, `~`)
    /// percent-encoded, so it stays one path segment or one query value whatever it holds (`/`, `&`, `=`, `+`, `#`).
    public var percentEncodedUnreserved: String {
        addingPercentEncoding(withAllowedCharacters: rfc3986Unreserved) ?? ""
    }
}

private let rfc3986Unreserved = CharacterSet(
    charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
