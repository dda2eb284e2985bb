/// Percentiles of a set of latencies (nearest rank), in milliseconds, for benchmark reports.
public struct LatencySummary: Sendable, Codable, Equatable {
    public var count: Int
    public var p50Ms: Double
    public var p90Ms: Double
    public var p99Ms: Double
    public var maximumMs: Double

    public init(_ latencies: [Duration]) {
        let sorted = latencies.map(Self.milliseconds).sorted()
        count = sorted.count
        p50Ms = Self.percentile(0.50, of: sorted)
        p90Ms = Self.percentile(0.90, of: sorted)
        p99Ms = Self.percentile(0.99, of: sorted)
        maximumMs = sorted.last ?? 0
    }

    /// The report's field names (`max_ms` kept for the renamed property).
    enum CodingKeys: String, CodingKey {
        case count, p50Ms, p90Ms, p99Ms
        case maximumMs = "maxMs"
    }

    /// The nearest-rank percentile `fraction` (0...1) of ascending `sorted` values; 0 when there are none.
    static func percentile(_ fraction: Double, of sorted: [Double]) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}
