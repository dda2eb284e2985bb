import Foundation
import Messages

/// Reads the licensing key of every Google Play app the catalog lists, at start: a key file that cannot be read or
/// does not hold a key stops the command with one line naming the app and the file, never the file's content.
public enum PlayLicensingKeys {
    /// The keys by package name.
    public static func load(
        _ catalog: Catalog, readFile: (String) throws -> Data = { try Data(contentsOf: URL(fileURLWithPath: $0)) }
    ) throws(PlayConfigurationError) -> [String: PlayLicensingKey] {
        var keys: [String: PlayLicensingKey] = [:]
        for (index, app) in catalog.playApps.enumerated() {
            let name = "play_apps[\(index)] (\(app.packageName)).licensing_key_file"
            let data: Data
            do {
                data = try readFile(app.licensingKeyFile)
            } catch {
                throw PlayConfigurationError("\(name): cannot read \(app.licensingKeyFile)")
            }
            guard let text = String(data: data, encoding: .utf8), let key = PlayLicensingKey(text: text) else {
                throw PlayConfigurationError(
                    "\(name): \(app.licensingKeyFile) is not a licensing key (the Play Console's base64 "
                        + "SubjectPublicKeyInfo of an RSA key of at least 1024 bits)")
            }
            keys[app.packageName] = key
        }
        return keys
    }
}

/// A Google Play setting that cannot be used, with the reason in one line (a path and a package name at most, never
/// a key).
public struct PlayConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
