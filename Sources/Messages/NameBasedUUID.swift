import Crypto

/// Name-based UUIDs (RFC 9562, version 5: SHA-1 of namespace and name), as Python's `uuid.uuid5` gives them: verdict
/// ids, derived app account tokens, entitlement event ids. SHA-1 derives stable identifiers here, never security.
public enum NameBasedUUID {
    /// RFC 9562's URL namespace (`6ba7b811-9dad-11d1-80b4-00c04fd430c8`), the namespace of verdict ids.
    public static let urlNamespace: [UInt8] = [
        0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
    ]
    static let verdictNamespace = urlNamespace

    /// The UUID's 16 bytes. Namespace and name are fed to BoringSSL's SHA-1 as they are, not joined first: every
    /// verdict has an id, and a joined copy and a SHA-1 in Swift were ~2 % of a worker's CPU (`bench pipeline` (b)).
    public static func bytes(namespace: [UInt8], name: String) -> [UInt8] {
        var hasher = Insecure.SHA1()
        namespace.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        var name = name
        name.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        var digest = Array(hasher.finalize().prefix(16))
        digest[6] = (digest[6] & 0x0F) | 0x50
        digest[8] = (digest[8] & 0x3F) | 0x80
        return digest
    }

    /// The UUID in its lower-case text form.
    public static func v5(namespace: [UInt8], name: String) -> String {
        text(bytes(namespace: namespace, name: name))
    }

    /// 16 bytes as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, written into one buffer (a string per byte and their joins
    /// were ~2 % of a worker's CPU).
    public static func text(_ bytes: [UInt8]) -> String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            var out = 0
            for (index, byte) in bytes.prefix(16).enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    buffer[out] = UInt8(ascii: "-")
                    out += 1
                }
                buffer[out] = hexDigits[Int(byte >> 4)]
                buffer[out + 1] = hexDigits[Int(byte & 0x0F)]
                out += 2
            }
            return out
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

/// The `appAccountToken` an account's purchases carry when the app does not set one itself: the version 5 UUID of
/// `app-account-token:` and the account id in the RFC's URL namespace (Python: `uuid.uuid5(uuid.NAMESPACE_URL,
/// "app-account-token:" + account_id)`). A job without `app_account_token` matches this token, so a transaction
/// the worker tagged with Set App Account Token stays grantable to its owner's later jobs (docs/messages.md).
public enum AppAccountToken {
    public static func derived(fromAccountID accountID: String) -> String {
        NameBasedUUID.v5(namespace: NameBasedUUID.verdictNamespace, name: "app-account-token:" + accountID)
    }
}
