/// Settings of ``CurlHTTPEngine``.
///
/// TLS peer and host verification is always on and cannot be switched off; `caBundlePath` only changes which
/// roots are trusted.
public struct HTTPEngineConfiguration: Sendable {
    /// The most connections open to one host at a time; further requests queue inside libcurl.
    /// Over HTTP/1.1 this bounds concurrency per host. 0 means no limit. Default: 1024.
    public var maximumHostConnections: Int
    /// The most connections open in total. 0 means no limit. Default: 2048.
    public var maximumTotalConnections: Int
    /// The time limit for opening a connection, TLS handshake included. Default: 5 s.
    public var connectTimeout: Duration
    /// The time limit for a whole request, unless the request sets its own. Default: 30 s.
    public var requestTimeout: Duration
    /// The largest response body accepted; bigger transfers are aborted. Default: 8 MiB.
    public var maximumResponseBytes: Int
    /// A PEM file of trusted root certificates, replacing the system bundle. Default: nil (system bundle).
    public var caBundlePath: String?
    /// How many finished easy handles are kept for reuse. Default: 256.
    public var easyHandlePoolSize: Int
    /// The `User-Agent` header. Default: `verify-worker`.
    public var userAgent: String
    /// The longest the poll thread waits in `epoll_wait` without a timer of libcurl's: a safety net, since every new
    /// request and cancellation wakes the thread explicitly. Not a setting: tests lengthen it to prove the wake-ups.
    var idleWaitLimit: Duration = .seconds(1)

    /// Creates a configuration; every argument has the documented default.
    public init(
        maximumHostConnections: Int = 1024,
        maximumTotalConnections: Int = 2048,
        connectTimeout: Duration = .seconds(5),
        requestTimeout: Duration = .seconds(30),
        maximumResponseBytes: Int = 8 << 20,
        caBundlePath: String? = nil,
        easyHandlePoolSize: Int = 256,
        userAgent: String = "verify-worker"
    ) {
        self.maximumHostConnections = maximumHostConnections
        self.maximumTotalConnections = maximumTotalConnections
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maximumResponseBytes = maximumResponseBytes
        self.caBundlePath = caBundlePath
        self.easyHandlePoolSize = easyHandlePoolSize
        self.userAgent = userAgent
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a positive duration never becomes 0 ("no limit" to libcurl).
    var roundedUpMilliseconds: Int {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int(clamping: max(millis, 1))
    }
}
