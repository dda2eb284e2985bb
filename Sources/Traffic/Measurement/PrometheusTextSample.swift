import Foundation

/// Values read back from Prometheus text (what `GET /metrics` serves), so a benchmark or a test can watch a
/// gauge such as the in-flight jobs or the Apple concurrency limit without a scraper.
public struct PrometheusTextSample: Sendable {
    /// Every sample line as (series with its labels, value); comments and unparsable lines are left out.
    public let samples: [(series: Substring, value: Double)]

    public init(_ text: String) {
        var samples: [(series: Substring, value: Double)] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            samples.append((line[..<space], value))
        }
        self.samples = samples
    }

    /// The values of the metric `name` (every label set), or an empty list when it was never recorded.
    public func values(of name: String) -> [Double] {
        samples.compactMap { sample in
            guard sample.series.hasPrefix(name) else { return nil }
            let rest = sample.series.dropFirst(name.count)
            return rest.isEmpty || rest.first == "{" ? sample.value : nil
        }
    }

    /// The sum of `name` over its label sets (0 when absent).
    public func sum(of name: String) -> Double { values(of: name).reduce(0, +) }

    /// The cumulative bucket counts of the histogram `name` (summed over its other labels), by upper bound in
    /// seconds (`+Inf` as infinity).
    public func histogramBuckets(of name: String) -> [Double: Double] {
        var buckets: [Double: Double] = [:]
        for sample in samples where sample.series.hasPrefix(name + "_bucket{") {
            guard let range = sample.series.range(of: #"le=""#) else { continue }
            let rest = sample.series[range.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { continue }
            let text = rest[..<end]
            guard let bound = text == "+Inf" ? Double.infinity : Double(text) else { continue }
            buckets[bound, default: 0] += sample.value
        }
        return buckets
    }

    /// The upper bound (seconds) of the bucket holding the `fraction` quantile of the observations recorded between
    /// `earlier` and `later` (two `histogramBuckets` readings); nil when none were recorded.
    public static func quantileUpperBound(
        _ fraction: Double, from earlier: [Double: Double], to later: [Double: Double]
    )
        -> Double?
    {
        let bounds = later.keys.sorted()
        guard let total = bounds.last.map({ later[$0, default: 0] - earlier[$0, default: 0] }), total > 0 else {
            return nil
        }
        return bounds.first { later[$0, default: 0] - earlier[$0, default: 0] >= fraction * total }
    }
}
