import GooglePlay
import GooglePlayClients
import Messages
import Operations
import StoreHTTP

extension WorkerRuntime {
    /// Google Play as `run` uses it (``GooglePlayStore/load(catalog:settings:transport:configurationWatch:jobDeadline:logger:)``);
    /// a Play app's key file that cannot be used stops the command as a `catalog_file` setting.
    func makeGooglePlayStore(
        catalog: Catalog, transport: any HTTPTransport, health: WorkerHealth
    ) throws -> GooglePlayStore {
        do {
            return try GooglePlayStore.load(
                catalog: catalog,
                settings: GooglePlayAPISettings(
                    api: GooglePlayAPIConfiguration(
                        baseURL: configuration.googlePlayAPIURL, tokenURL: configuration.googlePlayTokenURL,
                        requestTimeout: configuration.appleRequestTimeout),
                    dailyQuota: configuration.googlePlayDailyQuota, minuteQuota: configuration.googlePlayMinuteQuota,
                    workerID: configuration.workerID),
                transport: transport, configurationWatch: StoreConfigurationWatch(health: health, logger: logger),
                jobDeadline: configuration.jobDeadline, logger: logger)
        } catch {
            throw ConfigurationError(key: "catalog_file", problem: error.description)
        }
    }
}
