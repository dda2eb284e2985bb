import CodedErrors
import Messages
import Testing

@testable import RateLimiter

private typealias Support = RateLimiterTestSupport

@Suite("RateLimiter quota budgets (Google Play's daily and per-minute quotas)")
struct RateLimiterQuotaBudgetTests {
    private typealias Machine = AppleCallGateStateMachine<ManualClock.Instant, Int>

    /// A machine whose only limit is `budgets`, started at `unixMilliseconds` on the wall clock.
    private func machine(_ budgets: [QuotaBudget], unixMilliseconds: Int64 = 1_767_225_600_000) -> Machine {
        var configuration = Support.configuration(limit: 64)
        configuration.quotaBudgets = budgets
        return Machine(configuration: configuration, now: Support.at(0), unixMilliseconds: unixMilliseconds)
    }

    private func granted(_ result: Machine.ImmediateResult) -> Bool {
        if case .granted = result { return true }
        return false
    }

    private func refused(_ result: Machine.ImmediateResult) -> AppleCallGateError.Code? {
        if case .rejected(let error) = result { return error.code }
        return nil
    }

    @Test("past its limit a budget refuses a caller whose deadline comes before the window renews")
    func refusesPastLimit() {
        let budget = QuotaBudget(name: "minute", limit: 2, period: .minute, endpoints: [.playProductRead])
        var gate = machine([budget])
        let deadline = Support.at(30_000)
        for _ in 0..<2 {
            #expect(
                granted(
                    gate.acquireImmediately(
                        endpoint: .playProductRead, priority: .firstAttempt,
                        deadline: deadline, now: Support.at(0))))
        }
        #expect(
            refused(
                gate.acquireImmediately(
                    endpoint: .playProductRead, priority: .firstAttempt,
                    deadline: deadline, now: Support.at(1))) == .quotaExhausted)
        // Another endpoint is not counted by this budget.
        #expect(
            granted(
                gate.acquireImmediately(
                    endpoint: .playSubscriptionRead, priority: .firstAttempt,
                    deadline: deadline, now: Support.at(1))))
        // A caller that can wait for the next minute waits; the next minute serves it.
        #expect(
            refused(
                gate.acquireImmediately(
                    endpoint: .playProductRead, priority: .firstAttempt,
                    deadline: Support.at(120_000), now: Support.at(1))) == nil)
        #expect(
            granted(
                gate.acquireImmediately(
                    endpoint: .playProductRead, priority: .firstAttempt,
                    deadline: Support.at(120_000), now: Support.at(60_000))))
    }

    @Test("a waiter for a spent budget is granted when the window renews, and refused if its deadline comes first")
    func waitersAndRenewal() {
        let budget = QuotaBudget(name: "minute", limit: 1, period: .minute, endpoints: [.playProductRead])
        var gate = machine([budget])
        #expect(
            granted(
                gate.acquireImmediately(
                    endpoint: .playProductRead, priority: .firstAttempt,
                    deadline: nil, now: Support.at(0))))
        let patient = gate.enqueue(
            id: gate.reserveWaiterID(), endpoint: .playProductRead, priority: .firstAttempt,
            deadline: Support.at(90_000), payload: 1, now: Support.at(10))
        #expect(patient.grants.isEmpty && patient.failures.isEmpty)
        #expect(patient.wakeUp == Support.at(60_000), "woken when the minute renews")
        let hurried = gate.enqueue(
            id: gate.reserveWaiterID(), endpoint: .playProductRead, priority: .firstAttempt,
            deadline: Support.at(30_000), payload: 2, now: Support.at(20))
        #expect(hurried.failures.map(\.payload) == [2])
        #expect(hurried.failures.map(\.error.code) == [.quotaExhausted])
        let renewed = gate.wakeUp(now: Support.at(60_000))
        #expect(renewed.grants.map(\.payload) == [1])
    }

    @Test("Google Play's defaults: 200,000 a day over every Developer API call, 3,000 a minute per quota bucket")
    func googlePlayDefaults() {
        let configuration = AppleCallGateConfiguration.googlePlay()
        #expect(configuration.label == "google_play")
        let budgets = Dictionary(uniqueKeysWithValues: configuration.quotaBudgets.map { ($0.name, $0) })
        #expect(budgets["google_play_daily"]?.limit == 200_000)
        #expect(budgets["google_play_daily"]?.period == .pacificDay)
        #expect(budgets["google_play_daily"]?.endpoints.contains(.playToken) == false)
        #expect(budgets["google_play_subscriptions_minute"]?.limit == 3_000)
        #expect(
            budgets["google_play_subscriptions_minute"]?.endpoints
                == [.playSubscriptionRead, .playSubscriptionAcknowledge])
        #expect(
            budgets["google_play_one_time_purchases_minute"]?.endpoints
                == [.playProductRead, .playProductAcknowledge, .playProductConsume])
        #expect(configuration.rateLimits[.playSubscriptionRead] == EndpointRateLimit(ratePerSecond: 50, burst: 5))
        // Apple's table is unchanged and names no Play endpoint; equal names in two stores are two endpoints.
        #expect(EndpointRateLimit.appleDefaults(environment: .production).keys.allSatisfy { $0.store == .appStore })
        #expect(StoreEndpoint("token") != StoreEndpoint.playToken)
    }

    @Test(
        "Google Play's retry budget earns retries without traffic: the retries a 5xx storm queued go on once no first attempt comes"
    )
    func googlePlayRetriesWithoutTraffic() {
        let configuration = AppleCallGateConfiguration.googlePlay()
        #expect(configuration.retryBudgetMinimumPerSecond == 2)
        var budget = RetryBudget(
            ratio: configuration.retryBudgetRatio, maximumTokens: configuration.retryBudgetMaximumTokens,
            minimumPerSecond: configuration.retryBudgetMinimumPerSecond)
        while budget.tryWithdrawRetry() {}
        #expect(budget.timeUntilRetry == .milliseconds(500))
        budget.earn(over: .milliseconds(500))
        let retried = budget.tryWithdrawRetry()
        #expect(retried)
    }

    @Test("the daily window is Google's day, ending at midnight Pacific time in winter and in summer")
    func pacificDay() {
        let daily = QuotaBudget(name: "day", limit: 1, period: .pacificDay, endpoints: [])
        // 2026-01-01T00:00Z is 16:00 PST on 31 December: that day runs 08:00Z to 08:00Z.
        let winter = daily.window(containing: 1_767_225_600_000)
        #expect(winter.start == 1_767_168_000_000 && winter.end == 1_767_254_400_000)
        // 2026-07-01T12:00Z is 05:00 PDT: that day runs 07:00Z to 07:00Z.
        let summer = daily.window(containing: 1_782_907_200_000)
        #expect(summer.start == 1_782_889_200_000 && summer.end == 1_782_975_600_000)
        let minute = QuotaBudget(name: "minute", limit: 1, period: .minute, endpoints: [])
        #expect(minute.window(containing: 1_767_225_659_999) == (1_767_225_600_000, 1_767_225_660_000))
    }
}
