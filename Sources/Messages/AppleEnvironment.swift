/// The App Store environment a proof belongs to, that answered, or that a payload claims: the one spelling of
/// environments in the codebase (the rules, the App Store clients, the rate limits and the simulator share it).
public enum AppleEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
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
