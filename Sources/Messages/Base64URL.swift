import Foundation

/// Base64url (RFC 4648 section 5) and the unverified peek into a compact JWS: the one encoder and decoder of the
/// codebase's JWS segments (notification jobs' keys, the App Store Connect bearer token, the simulator's signed
/// objects, the harness's forged ones). Receipts' verifier reads JWS through its own receipt base64 decoder.
public enum Base64URL {
    /// Without padding, as JWS wants it.
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Base64url, padding optional, also read with `+` and `/`; nil for any other character or an impossible
    /// length.
    public static func decode(_ text: some StringProtocol) -> Data? {
        decode(ArraySlice(text.utf8))
    }

    /// The same, from UTF-8 bytes.
    public static func decode(_ text: ArraySlice<UInt8>) -> Data? {
        var text = text
        while text.last == UInt8(ascii: "=") { text = text.dropLast() }
        guard text.count % 4 != 1 else { return nil }
        // Into a preallocated array, not `Data.append` byte by byte (which cost more than the JSON parse).
        var decoded = [UInt8](repeating: 0, count: text.count * 3 / 4)
        let table = self.table
        let valid = decoded.withUnsafeMutableBufferPointer { output in
            table.withUnsafeBufferPointer { table in
                var buffer: UInt32 = 0
                var bits = 0
                var written = 0
                for byte in text {
                    let value = table[Int(byte)]
                    guard value < 64 else { return false }
                    buffer = buffer << 6 | UInt32(value)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        output[written] = UInt8(truncatingIfNeeded: buffer >> UInt32(bits))
                        written += 1
                    }
                }
                return true
            }
        }
        return valid ? Data(decoded) : nil
    }

    /// Each byte's 6-bit value in the base64url alphabet, 0xFF for bytes outside it.
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(byte)] = UInt8(value)
        }
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()
}

/// A compact JWS (`header.payload.signature`) read without verifying it.
public enum CompactJWS {
    /// The middle of exactly three dot-separated segments. Read as UTF-8 bytes, not `Character`s: a notification is
    /// 16 KB, and splitting it by grapheme (and base64 through `NSString`) cost the gateway more than verifying it.
    public static func payloadSegment(of jws: String) -> ArraySlice<UInt8>? {
        let bytes = Array(jws.utf8)
        let dot = UInt8(ascii: ".")
        guard let first = bytes.firstIndex(of: dot),
            let second = bytes[(first + 1)...].firstIndex(of: dot),
            !bytes[(second + 1)...].contains(dot)
        else { return nil }
        return bytes[(first + 1)..<second]
    }

    /// The JSON object in the payload, unverified; nil when it is no compact JWS or its payload no JSON object.
    public static func payloadObject(of jws: String) -> [String: Any]? {
        payloadSegment(of: jws).flatMap(object(base64URL:))
    }

    /// The JSON object a base64url segment holds.
    static func object(base64URL segment: ArraySlice<UInt8>) -> [String: Any]? {
        guard let payload = Base64URL.decode(segment) else { return nil }
        return (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any]
    }
}
