import Foundation
import Logging
import Operations
import Receipts
import StoreHTTP

/// Each app's Apple clients, chosen by the bundle id the proof names: a receipt's bundle id, a
/// transaction's or notification's `bundleId`, or a bare transaction id job's `bundle_id`. Each app's verifyReceipt
/// client sends that app's shared secret; each app's Server API client signs tokens whose `bid` is that app's
/// bundle id and accepts only signed payloads of that app.
public struct AppleAppClients: Sendable {
    /// One app's clients.
    public struct App: Sendable {
        public var bundleID: String
        public var appAppleID: Int64?
        public var verifyReceipt: VerifyReceiptClient
        public var serverAPI: AppStoreServerAPIClient?

        public init(
            bundleID: String, appAppleID: Int64?, verifyReceipt: VerifyReceiptClient,
            serverAPI: AppStoreServerAPIClient?
        ) {
            self.bundleID = bundleID
            self.appAppleID = appAppleID
            self.verifyReceipt = verifyReceipt
            self.serverAPI = serverAPI
        }
    }

    /// In the catalog's order.
    public let apps: [App]
    /// True for a single-app configuration: its one app serves every bundle id the catalog accepts.
    public let servesEveryBundleID: Bool

    public init(apps: [App], servesEveryBundleID: Bool) {
        self.apps = apps
        self.servesEveryBundleID = servesEveryBundleID
    }

    /// The clients of each app in `credentials`, over one transport.
    public init(
        credentials: AppCredentials, transport: any HTTPTransport, verifyReceipt: VerifyReceiptConfiguration,
        serverAPI: AppStoreServerAPIConfiguration, analyzer: ReceiptAnalyzer, logger: Logger
    ) {
        let apps = credentials.apps.map { app in
            var receiptConfiguration = verifyReceipt
            receiptConfiguration.sharedSecret = app.sharedSecret.map { AppleSharedSecret($0.value) }
            return App(
                bundleID: app.bundleID, appAppleID: app.appAppleID,
                verifyReceipt: VerifyReceiptClient(
                    transport: transport, configuration: receiptConfiguration, logger: logger),
                serverAPI: app.serverAPIKey.map { key in
                    AppStoreServerAPIClient(
                        transport: transport, configuration: serverAPI, signer: AppStoreTokenSigner(key: key),
                        verifier: ReceiptsPayloadVerifier(analyzer: analyzer, bundleID: app.bundleID), logger: logger)
                })
        }
        self.init(apps: apps, servesEveryBundleID: !credentials.listedInCatalog)
    }

    /// The app a proof of `bundleID` belongs to; nil when no listed app has that bundle id. An unknown bundle id
    /// (a proof the analysis could not read it from) goes to the first app: Apple answers for the app it names.
    public func app(for bundleID: String?) -> App? {
        if servesEveryBundleID { return apps.first }
        guard let bundleID else { return apps.first }
        return apps.first { $0.bundleID == bundleID }
    }

    /// The Server API clients to ask about a bare transaction id, in order: the named app's, or, when the job names
    /// none or an app the catalog does not list, every app's (Apple answers 404 for another app's transaction, and
    /// the next one is asked; a transaction found for another app than the job names is then `wrong_bundle`, as
    /// with one app).
    public func serverAPIs(for bundleID: String?) -> [AppStoreServerAPIClient] {
        if let bundleID, !servesEveryBundleID, let app = app(for: bundleID) { return app.serverAPI.map { [$0] } ?? [] }
        return apps.compactMap(\.serverAPI)
    }

    /// The Apple id production notifications of `bundleID`'s app must name (nil checks nothing).
    public func appAppleID(for bundleID: String?) -> Int64? {
        app(for: bundleID)?.appAppleID
    }
}
