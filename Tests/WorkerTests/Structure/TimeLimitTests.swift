import Foundation
import Testing

/// A time limit is a hang guard, not a speed assertion. Swift Testing starts every test of the run at once, and on
/// two cores the first minute of a full run keeps both busy: a test that takes 5 s alone took 65 s there
/// (measured before the run's heaviest starters were eased), so a one-minute limit failed healthy tests at random.
@Suite("Structure: time limits are hang guards")
struct TimeLimitTests {
    /// The shortest limit a test may declare.
    static let minimumMinutes = 2

    @Test("every declared time limit is whole minutes and at least two of them")
    func limitsAreGuards() throws {
        let marker = "timeLimit" + "("
        var declared = 0
        var offenders: [String] = []
        for (path, text) in try TestEnvironment.swiftFiles(under: "Tests") {
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                var rest = line[...]
                while let range = rest.range(of: marker) {
                    rest = rest[range.upperBound...]
                    declared += 1
                    if let minutes = Self.minutes(in: rest), minutes >= Self.minimumMinutes { continue }
                    offenders.append("\(path):\(number + 1)")
                }
            }
        }
        #expect(declared >= 100, "the scan found \(declared) limits; it reads the wrong files")
        #expect(offenders.isEmpty, "limits shorter than \(Self.minimumMinutes) minutes or not in minutes: \(offenders)")
    }

    @Test("the scan reads minutes and refuses seconds")
    func scanReadsMinutes() {
        #expect(Self.minutes(in: ".minutes(3)))") == 3)
        #expect(Self.minutes(in: ".minutes(1))") == 1)
        #expect(Self.minutes(in: ".seconds(90))") == nil)
        #expect(Self.minutes(in: "limit)") == nil)
    }

    /// N in text that starts with `.minutes(N)`.
    static func minutes(in text: Substring) -> Int? {
        let prefix = ".minutes("
        guard text.hasPrefix(prefix) else { return nil }
        return Int(text.dropFirst(prefix.count).prefix { $0.isNumber })
    }

    static func minutes(in text: String) -> Int? { minutes(in: text[...]) }
}
