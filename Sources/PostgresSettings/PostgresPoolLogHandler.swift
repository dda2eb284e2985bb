import Logging

/// The pool's background logger: the store's own handler, except for a connection the pool gave up opening because it
/// stops.
///
/// When the pool's `run()` is cancelled (the store stops) while a connection is still being opened, PostgresNIO closes
/// that connection and says "Connection creation failed" at info, with `clientClosedConnection` (or a
/// `CancellationError` before TCP connected). Nothing failed: only the pool's own shutdown cancels an attempt, and no
/// operation waits for it any more. That record is said at debug as what it is. Every other record passes unchanged,
/// a connection refused, timed out or rejected by the server among them.
struct PostgresPoolLogHandler: LogHandler {
    var base: any LogHandler

    /// PostgresNIO's words and metadata keys for a connection attempt that ended without a connection
    /// (`PostgresClientMetrics.connectFailed`).
    static let connectFailedMessage = "Connection creation failed"
    static let errorKey = "psql_error"
    static let connectionKey = "psql_connection_id"
    /// The errors of an attempt the client itself closed or cancelled, as PostgresNIO renders them.
    static let abandonedErrorPrefixes = ["PSQLError(code: clientClosedConnection", "Swift.CancellationError"]

    /// Whether `event` is PostgresNIO's record of an attempt the pool abandoned itself.
    static func isAbandonedAttempt(_ event: LogEvent) -> Bool {
        guard event.message.description == connectFailedMessage, case .string(let error)? = event.metadata?[errorKey]
        else { return false }
        return abandonedErrorPrefixes.contains { error.hasPrefix($0) }
    }

    func log(event: LogEvent) {
        guard Self.isAbandonedAttempt(event) else { return base.log(event: event) }
        guard base.logLevel <= .debug else { return }
        var restated = event
        restated.level = .debug
        restated.message = "PostgreSQL connection attempt given up: the pool is stopping"
        restated.metadata = event.metadata?[Self.connectionKey].map { [Self.connectionKey: $0] }
        base.log(event: restated)
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    /// `logger` with its handler wrapped.
    static func wrapping(_ logger: Logger) -> Logger {
        var wrapped = logger
        wrapped.handler = PostgresPoolLogHandler(base: logger.handler)
        return wrapped
    }
}
