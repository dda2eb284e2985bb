/// The app-specific shared secret sent as verifyReceipt's `password`.
///
/// Every textual form (`description`, `debugDescription`, `dump`, string interpolation) is redacted, so the
/// secret cannot reach a log line or an error text by accident.
public struct AppleSharedSecret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The secret itself; read only where the request body is built.
    let value: String

    /// Wraps a secret.
    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<redacted shared secret>" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
