import Foundation
import RateLimiter
import Receipts

/// Feeds mutated receipts to an analyzer to show that no input crashes or hangs it. Deterministic for a seed,
/// so a failure can be replayed. Used by the CI fuzz test (small counts) and `bench receipts --fuzz N`.
public struct ReceiptFuzzer: Sendable {
    /// What a run observed.
    public struct Report: Sendable {
        public var inputs: Int
        public var formatCounts: [ReceiptFormat: Int]
        /// The slowest single analysis, in CPU seconds of the thread that ran it: the bound that shows nothing
        /// runs away (a busy machine does not inflate it).
        public var slowestSeconds: Double
        public var totalSeconds: Double
    }

    public var seeds: [[UInt8]]
    public var seed: UInt64

    public init(seeds: [[UInt8]], seed: UInt64 = 0x5EED_1234) {
        self.seeds = seeds
        self.seed = seed
    }

    /// Runs `count` mutated inputs through `analyzer`, round robin over the seeds.
    public func run(count: Int, analyzer: ReceiptAnalyzer) -> Report {
        var generator = SplitMix64(seed: seed)
        var report = Report(inputs: 0, formatCounts: [:], slowestSeconds: 0, totalSeconds: 0)
        let clock = ContinuousClock()
        let started = clock.now
        guard !seeds.isEmpty else { return report }
        for index in 0..<count {
            let input = Self.mutate(seeds[index % seeds.count], using: &generator)
            let before = ThreadCPUTime.seconds()
            let analysis = analyzer.analyze(input)
            let seconds = ThreadCPUTime.seconds() - before
            report.slowestSeconds = max(report.slowestSeconds, seconds)
            report.formatCounts[analysis.format, default: 0] += 1
            report.inputs += 1
        }
        let total = started.duration(to: clock.now)
        report.totalSeconds = Double(total.components.seconds) + Double(total.components.attoseconds) * 1e-18
        return report
    }

    /// One mutation of a seed: bit flips, byte overwrites with interesting values, truncation, duplication
    /// of a span, insertion of length-like bytes, or deletion. Applies one to four of them.
    public static func mutate(_ original: [UInt8], using generator: inout SplitMix64) -> [UInt8] {
        var bytes = original
        let rounds = 1 + Int(generator.next() % 4)
        for _ in 0..<rounds {
            guard !bytes.isEmpty else { break }
            let position = Int(generator.next() % UInt64(bytes.count))
            switch generator.next() % 7 {
            case 0:
                bytes[position] ^= UInt8(1 << (generator.next() % 8))
            case 1:
                let interesting: [UInt8] = [0x00, 0x80, 0x81, 0x84, 0xFF, 0x30, 0x31, 0x04, 0x24, 0x2E, 0x3D, 0x22]
                bytes[position] = interesting[Int(generator.next() % UInt64(interesting.count))]
            case 2:
                bytes.removeSubrange(position...)
            case 3:
                let length = min(bytes.count - position, Int(generator.next() % 64))
                bytes.insert(contentsOf: bytes[position..<(position + length)], at: position)
            case 4:
                bytes.insert(contentsOf: [0x80, 0x00, 0x00], at: position)
            case 5:
                let length = min(bytes.count - position, 1 + Int(generator.next() % 16))
                bytes.removeSubrange(position..<(position + length))
            default:
                bytes[position] = UInt8(truncatingIfNeeded: generator.next())
            }
        }
        return bytes
    }
}
