import Testing
import Worker

@testable import Traffic

/// The small measuring pieces `bench pipeline` uses: they run in milliseconds, with no process or socket.
@Suite("Process: benchmark pieces")
struct ProcessBenchmarkPiecesTests {
    @Test("ProcessMemory reads VmRSS and VmHWM in bytes, and nil without VmRSS")
    func processMemory() {
        let status = "Name:\tverify-worker\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n"
        #expect(
            ProcessMemory.parse(status: status)
                == ProcessMemory(residentBytes: 102_400 * 1024, peakResidentBytes: 204_800 * 1024))
        #expect(ProcessMemory.parse(status: "Name:\tx\nVmRSS:\tlots kB\n") == nil)
        #expect(ProcessMemory.current().map { $0.residentBytes > 0 } ?? true)
    }

    @Test("LatencySummary takes nearest-rank percentiles in milliseconds")
    func latencySummary() {
        let summary = LatencySummary((1...100).map { Duration.milliseconds($0) })
        #expect(summary.count == 100)
        #expect(summary.p50Ms == 50)
        #expect(summary.p90Ms == 90)
        #expect(summary.p99Ms == 99)
        #expect(summary.maximumMs == 100)
        #expect(LatencySummary([]).p99Ms == 0)
    }

    @Test("PrometheusTextSample sums a metric over its labels and ignores look-alike names and comments")
    func prometheusText() {
        let text = """
            # TYPE verify_verdicts_total counter
            verify_verdicts_total{outcome="granted"} 3
            verify_verdicts_total{outcome="rejected"} 4.5
            verify_verdicts_total_extra 100
            verify_jobs_in_flight 7
            garbage line
            """
        let sample = PrometheusTextSample(text)
        #expect(sample.sum(of: "verify_verdicts_total") == 7.5)
        #expect(sample.values(of: "verify_jobs_in_flight") == [7])
        #expect(sample.sum(of: "verify_absent") == 0)
    }

    @Test("PrometheusTextSample reads histogram buckets and the bucket of a quantile between two readings")
    func histogramQuantile() {
        let before = PrometheusTextSample(
            """
            d_bucket{le="0.1"} 10
            d_bucket{le="1.0"} 10
            d_bucket{le="+Inf"} 10
            """
        ).histogramBuckets(of: "d")
        let after = PrometheusTextSample(
            """
            d_bucket{le="0.1"} 60
            d_bucket{le="1.0"} 108
            d_bucket{le="+Inf"} 110
            d_sum 12
            """
        ).histogramBuckets(of: "d")
        #expect(after[0.1] == 60)
        #expect(after[.infinity] == 110)
        #expect(PrometheusTextSample.quantileUpperBound(0.5, from: before, to: after) == 0.1)
        #expect(PrometheusTextSample.quantileUpperBound(0.99, from: before, to: after) == .infinity)
        #expect(PrometheusTextSample.quantileUpperBound(0.9, from: before, to: after) == 1.0)
        #expect(PrometheusTextSample.quantileUpperBound(0.5, from: after, to: after) == nil)
    }
}
