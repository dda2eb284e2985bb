import Testing

@testable import Chaos

/// How the chaos harness submits a burst: one account's messages of a burst in order, one after another's delivery
/// report (when a grant, junk and a second purchase under one job id were sent concurrently,
/// the second purchase landed first and took the job id, and the run's truth, which assumes their order, saw four
/// violations).
@Suite("Chaos: submission order")
struct ChaosSubmissionOrderTests {
    static func message(_ key: String, _ value: String) -> ChaosMessage {
        ChaosMessage(key: Array(key.utf8), value: Array(value.utf8))
    }

    @Test("one key's messages of a burst form one chain, in order; other keys and other bursts do not join it")
    func chainsPerBurstAndKey() {
        var traffic = ChaosTraffic()
        traffic.burst { traffic in
            traffic.append(Self.message("acct-a", "grant"))
            traffic.append(Self.message("acct-b", "racer"))
            traffic.append(Self.message("acct-a", "junk"))
            traffic.append(Self.message("acct-a", "other"))
        }
        traffic.append(Self.message("acct-a", "later, a burst of its own"))
        traffic.burst { traffic in
            traffic.append(Self.message("acct-c", "one"))
            traffic.append(Self.message("acct-c", "two"))
        }

        #expect(traffic.chains(0..<7) == [[0, 2, 3], [1], [4], [5, 6]])
        // A range cut through a burst keeps what it holds of the chain.
        #expect(traffic.chains(3..<6) == [[3], [4], [5]])
        #expect(traffic.chains(0..<0).isEmpty)
    }

    @Test("the seeded shuffle moves bursts whole: every chain keeps its messages adjacent and in order")
    func shuffleKeepsChains() {
        var traffic = ChaosTraffic()
        for burst in 0..<50 {
            traffic.burst { traffic in
                for step in 0..<3 { traffic.append(Self.message("acct-\(burst)", "\(burst)-\(step)")) }
            }
        }
        traffic.shuffleBursts(seed: 42)

        let chains = traffic.chains(0..<traffic.messages.count)
        #expect(chains.count == 50)
        #expect(chains.map(\.count).allSatisfy { $0 == 3 })
        for chain in chains {
            let values = chain.map { String(decoding: traffic.messages[$0].value, as: UTF8.self) }
            let burst = values[0].split(separator: "-")[0]
            #expect(values == ["\(burst)-0", "\(burst)-1", "\(burst)-2"])
        }
        let bursts = chains.map {
            String(decoding: traffic.messages[$0[0]].value, as: UTF8.self).split(separator: "-")[0]
        }
        #expect(bursts.map(String.init) != (0..<50).map(String.init), "the seed moved no burst")
    }
}
