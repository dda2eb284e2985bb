/// The shape of a Google Play purchase token accepted without asking Google: 1 to 4,096 bytes of `A-Z a-z 0-9 . _ -`
/// (Google's tokens are long dotted strings of these). Any other token is refused without a call.
public enum PlayPurchaseToken {
    /// The longest token accepted, in bytes.
    public static let maximumBytes = 4096

    /// Why `token` is not of the accepted shape, or nil when it is. The reason never quotes the token.
    public static func problem(_ token: String) -> String? {
        let bytes = token.utf8
        if bytes.isEmpty { return "the purchase token is empty" }
        if bytes.count > maximumBytes { return "the purchase token is longer than \(maximumBytes) bytes" }
        let allowed = bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
        return allowed ? nil : "the purchase token has a character other than A-Z a-z 0-9 . _ -"
    }
}
