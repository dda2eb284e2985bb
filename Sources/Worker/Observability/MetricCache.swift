import Synchronization

/// Metrics made on first use and then reused, by key (e.g. a verdict's outcome, reason and stage).
///
/// Making a swift-metrics `Counter` or `Timer` goes through the metrics system's lock and the Prometheus registry's
/// lookup of the name and labels; on the per-job path that was done three times per job. A lookup here is one short
/// lock. Made lazily, not up front, so `/metrics` lists only the series that occurred, as before.
final class MetricCache<Key: Hashable & Sendable, Metric: Sendable>: Sendable {
    private let made = Mutex<[Key: Metric]>([:])
    private let make: @Sendable (Key) -> Metric

    init(_ make: @escaping @Sendable (Key) -> Metric) { self.make = make }

    subscript(_ key: Key) -> Metric {
        if let metric = made.withLock({ $0[key] }) { return metric }
        // Made outside the lock (it takes the factory's); if two threads race, the first one stored wins.
        let metric = make(key)
        return made.withLock { made in
            if let existing = made[key] { return existing }
            made[key] = metric
            return metric
        }
    }
}
