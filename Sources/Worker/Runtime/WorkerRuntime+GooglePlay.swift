import GooglePlay
import GooglePlayClients
import Ledger
import Messages
import Operations
import StoreHTTP

extension WorkerRuntime {
    /// Google Play as `run` uses it: the apps' clients (``GooglePlayAppClients``) and the store that reads purchases
    /// with them (``GooglePlayStore``). A Play app's key file that cannot be used stops the command as a
    /// `catalog_file` setting.
    func makeGooglePlay(
        catalog: Catalog, transport: any HTTPTransport, health: WorkerHealth, ledger: any Ledger
    ) throws -> (store: GooglePlayStore, clients: GooglePlayAppClients) {
        do {
            let clients = try GooglePlayAppClients.load(
                catalog: catalog,
                settings: GooglePlayAPISettings(
                    api: GooglePlayAPIConfiguration(
                        baseURL: configuration.googlePlayAPIURL, tokenURL: configuration.googlePlayTokenURL,
                        requestTimeout: configuration.appleRequestTimeout),
                    dailyQuota: configuration.googlePlayDailyQuota, minuteQuota: configuration.googlePlayMinuteQuota,
                    workerID: configuration.workerID),
                transport: transport, logger: logger)
            let store = try GooglePlayStore.load(
                catalog: catalog, clients: clients,
                configurationWatch: StoreConfigurationWatch(health: health, logger: logger),
                jobDeadline: configuration.jobDeadline, logger: logger, purchaseClaims: ledger)
            return (store, clients)
        } catch {
            throw ConfigurationError(key: "catalog_file", problem: error.description)
        }
    }
}
