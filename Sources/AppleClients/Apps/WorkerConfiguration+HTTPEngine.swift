import Operations
import StoreHTTP

extension WorkerConfiguration {
    /// The HTTP engine of the calls to the stores (for `run` and `reconcile` alike): the configuration's Apple connect
    /// and request timeouts and its CA bundle. Its owner shuts it down once every part that calls a store has stopped.
    public func storeHTTPEngine() throws -> CurlHTTPEngine {
        try CurlHTTPEngine(
            configuration: HTTPEngineConfiguration(
                connectTimeout: appleConnectTimeout, requestTimeout: appleRequestTimeout, caBundlePath: caBundle))
    }
}
