/// A small seeded random number generator (SplitMix64), for reproducible jitter in tests and simulations.
///
/// Not cryptographic. Production code may use it too (seeded from `SystemRandomNumberGenerator`) since jitter only
/// needs to decorrelate workers.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fully determined by `seed`.
    public init(seed: UInt64) {
        self.state = seed
    }

    /// A generator seeded from the system's random source.
    public init() {
        var system = SystemRandomNumberGenerator()
        self.state = system.next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
