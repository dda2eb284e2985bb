/// The Apple environment that answered or that a payload claims.
public enum AppleEnvironment: String, Sendable, Hashable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    /// StoreKit testing in Xcode.
    case xcode = "Xcode"
    /// The Server API's local testing environment.
    case localTesting = "LocalTesting"

    /// Parses Apple's spelling, tolerating case differences; nil for anything else.
    public init?(appleName: String) {
        guard let match = Self.allCases.first(where: { $0.rawValue.lowercased() == appleName.lowercased() }) else {
            return nil
        }
        self = match
    }
}
