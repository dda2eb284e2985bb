/// Bounds the jobs a worker holds in memory, with hysteresis: partitions are paused when the in-flight count
/// reaches the high-water mark and resumed when it falls to the low-water mark, so a worker does not flap between
/// pause and resume on every job.
public struct FlowControl: Sendable, Hashable {
    /// What the caller should do after a change in the in-flight count.
    public enum Action: Sendable, Hashable {
        case none
        /// Pause fetching from every assigned partition.
        case pause
        /// Resume fetching.
        case resume
    }

    public let highWater: Int
    public let lowWater: Int
    public private(set) var inFlight = 0
    public private(set) var isPaused = false

    /// - Parameters:
    ///   - maximumInFlight: jobs held at most (running and waiting for their key). Default in the worker: 10,000.
    ///   - resumeFraction: the share of the maximum at which fetching resumes. Default: 0.75.
    public init(maximumInFlight: Int, resumeFraction: Double = 0.75) {
        precondition(maximumInFlight > 0, "maximumInFlight must be positive")
        highWater = maximumInFlight
        lowWater = max(0, min(maximumInFlight - 1, Int(Double(maximumInFlight) * resumeFraction)))
    }

    /// One more job was taken from Kafka.
    public mutating func admitted() -> Action {
        inFlight += 1
        if !isPaused, inFlight >= highWater {
            isPaused = true
            return .pause
        }
        return .none
    }

    /// A job finished (or was abandoned on revoke).
    public mutating func released(count: Int = 1) -> Action {
        inFlight = max(0, inFlight - count)
        if isPaused, inFlight <= lowWater {
            isPaused = false
            return .resume
        }
        return .none
    }
}
