import Foundation

extension Date {
    /// Milliseconds since 1970, rounded to the nearest: how Apple, the ledger's evidence and the messages write an
    /// instant. (The rate limiter, which depends on nothing, and SQLite storage keep their own.)
    public var epochMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }

    /// The instant `milliseconds` after 1970.
    public init(epochMilliseconds milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
