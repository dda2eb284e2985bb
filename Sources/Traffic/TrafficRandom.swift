import RateLimiter

/// A traffic generator's draws, from RateLimiter's SplitMix64 seeded by the generator's seed (the same seed draws the
/// same traffic), and the id of its run, random per run so that two runs' job ids never meet.
struct TrafficRandom {
    private var generator: SplitMix64
    let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)

    init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    mutating func unit() -> Double { generator.unit() }

    mutating func below(_ bound: Int) -> Int { generator.below(bound) }
}

extension SplitMix64 {
    /// A draw in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// A draw in 0..<bound (bound > 0).
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
