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
}
