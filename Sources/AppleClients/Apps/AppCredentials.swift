import Foundation
import Messages
import Operations

/// The credentials of each app the worker verifies for: its bundle id, its Apple id, its verifyReceipt
/// shared secret and its App Store Server API key. From the catalog's `apps` (secrets read from the files it names),
/// or, when the catalog lists no apps, from the worker's own keys as before: one app that serves every bundle id of
/// `bundle_ids`.
public struct AppCredentials: Sendable {
    /// One app's credentials. Prints no secret (``Secret`` and ``AppStoreConnectKey`` redact themselves).
    public struct App: Sendable {
        public var bundleID: String
        public var appAppleID: Int64?
        public var sharedSecret: Secret?
        public var serverAPIKey: AppStoreConnectKey?
    }

    /// The apps in the catalog's order; exactly one when the catalog lists none.
    public let apps: [App]
    /// Whether the catalog listed the apps. False: the one app serves every bundle id the catalog accepts, as a
    /// single-app configuration always did.
    public let listedInCatalog: Bool

    /// Reads each app's secrets. Throws ``ConfigurationError`` naming the key or the catalog entry and the file,
    /// never a file's content.
    public static func load(
        catalog: Catalog, configuration: WorkerConfiguration,
        readFile: (String) throws -> String = { try String(contentsOfFile: $0, encoding: .utf8) }
    ) throws(ConfigurationError) -> AppCredentials {
        guard !catalog.apps.isEmpty else { return try single(catalog: catalog, configuration: configuration) }
        // Two places for one app's secret would leave a reader guessing which one is used.
        for (key, isSet) in [
            ("shared_secret", configuration.sharedSecret != nil), ("server_api_key", configuration.serverAPIKey != nil),
            ("apple_app_apple_id", configuration.appleAppAppleID != nil),
        ] where isSet {
            throw ConfigurationError(
                key: key,
                problem: "the catalog lists apps: give each app's own in the catalog's apps (see docs/CONFIGURATION.md)"
            )
        }
        let listed = Set(catalog.apps.map(\.bundleID))
        if let stray = catalog.bundleIDs.subtracting(listed).sorted().first {
            throw ConfigurationError(
                key: "catalog_file",
                problem: "bundle_ids names \(stray), which apps does not list (each app needs its own entry)")
        }
        var apps: [App] = []
        for (index, entry) in catalog.apps.enumerated() {
            let name = "apps[\(index)] (\(entry.bundleID))"
            var app = App(bundleID: entry.bundleID, appAppleID: entry.appAppleID)
            if let path = entry.sharedSecretFile {
                app.sharedSecret = Secret(try secretFile(path, field: "\(name).shared_secret_file", readFile))
            }
            if let reference = entry.serverAPI {
                let field = "\(name).server_api.private_key_file"
                let pem = try secretFile(reference.privateKeyFile, field: field, readFile)
                do {
                    app.serverAPIKey = try AppStoreConnectKey(
                        keyID: reference.keyID, issuerID: reference.issuerID, bundleID: entry.bundleID,
                        privateKeyPEM: pem)
                } catch {
                    throw ConfigurationError(
                        key: "catalog_file",
                        problem: "\(field): \(reference.privateKeyFile) is not a P-256 private key in PEM (.p8)")
                }
            }
            apps.append(app)
        }
        return AppCredentials(apps: apps, listedInCatalog: true)
    }

    /// Today's keys as one app. Its token's `bid` is the catalog's first bundle id in sorted order, as before.
    static func single(
        catalog: Catalog, configuration: WorkerConfiguration
    ) throws(ConfigurationError) -> AppCredentials {
        let bundleID = catalog.bundleIDs.sorted().first ?? ""
        var app = App(
            bundleID: bundleID, appAppleID: configuration.appleAppAppleID, sharedSecret: configuration.sharedSecret)
        if let key = configuration.serverAPIKey, let keyID = configuration.serverAPIKeyID,
            let issuerID = configuration.serverAPIIssuerID
        {
            do {
                app.serverAPIKey = try AppStoreConnectKey(
                    keyID: keyID, issuerID: issuerID, bundleID: bundleID, privateKeyPEM: key.value)
            } catch {
                throw ConfigurationError(key: "server_api_key", problem: "not a P-256 private key in PEM (.p8)")
            }
        }
        return AppCredentials(apps: [app], listedInCatalog: false)
    }

    /// A secret file's text without trailing line ends (as the worker's own `*_file` keys read it).
    private static func secretFile(
        _ path: String, field: String, _ readFile: (String) throws -> String
    ) throws(ConfigurationError) -> String {
        let trimmed = ConfigurationFile.trimmingTrailingLineEnds(
            try ConfigurationFile.read(path, key: "catalog_file", field: field, with: readFile))
        guard !trimmed.isEmpty else {
            throw ConfigurationError(key: "catalog_file", problem: "\(field): \(path) is empty")
        }
        return trimmed
    }
}
