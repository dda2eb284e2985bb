import Logging

/// A swift-log handler for tests: every record, at every level, with the logger's metadata merged under the record's,
/// handed to `record`, which renders and keeps it as the test needs.
struct RecordingLogHandler: LogHandler {
    let record: @Sendable (LogEvent, Logger.Metadata) -> Void
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(_ record: @escaping @Sendable (LogEvent, Logger.Metadata) -> Void) { self.record = record }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        all.merge(event.metadata ?? [:]) { $1 }
        record(event, all)
    }
}
