import RateLimiter

/// A discrete-event simulation of one worker calling a simulated Apple through the gate's state machine during a
/// 21005 storm, on a ``ManualClock``: a 30-second storm takes milliseconds of real time.
///
/// It runs the very ``AppleCallGate`` logic (the state machine, with job numbers in place of continuations) and the
/// ``RetryPolicy``; Apple answers after a fixed latency, refuses calls beyond its capacity with 503, and during the
/// storm answers 21005 to a share of calls. Jobs arrive at a steady rate, each with a deadline; a job that cannot get
/// an answer by then ends `unverifiable` (`apple_unavailable`). It is used by `verify-worker bench ratelimiter` and
/// lets an operator try a configuration before deploying it.
public struct StormSimulation: Sendable {
    /// What to simulate.
    public struct Parameters: Sendable {
        /// New jobs per second. Default: 20.
        public var jobsPerSecond: Double = 20
        /// Apple's answer time. Default: 100 ms.
        public var appleLatency: Duration = .milliseconds(100)
        /// Calls Apple serves at once; more are answered 503 after `appleLatency / 10`. Default: 40.
        public var appleCapacity: Int = 40
        /// When the storm starts. Default: 30 s.
        public var stormStart: Duration = .seconds(30)
        /// How long it lasts. Default: 30 s.
        public var stormDuration: Duration = .seconds(30)
        /// The share of calls answered 21005 during the storm. Default: 0.5.
        public var stormFailureRatio: Double = 0.5
        /// Time from a job's arrival to its deadline. Default: 60 s.
        public var jobDeadline: Duration = .seconds(60)
        /// How long jobs keep arriving after the storm. Default: 40 s.
        public var arrivalsAfterStorm: Duration = .seconds(40)
        /// Seed of the jitter and of Apple's answers. Default: 42.
        public var seed: UInt64 = 42
        /// The gate under test. Default: the production defaults.
        public var gate = AppleCallGateConfiguration(label: "simulation")
        /// The retry policy. Default: ``RetryPolicy/init(base:maximumBackoff:maximumAttempts:)``.
        public var retryPolicy = RetryPolicy()

        public init() {}

        var stormEnd: Duration { stormStart + stormDuration }
    }

    /// What happened, for the benchmark's JSON.
    public struct Report: Sendable, Codable, Hashable {
        /// Calls per second (all calls Apple received, failed ones included) before the storm, from 10 s on.
        public var preStormCallsPerSecond: Double
        /// Calls per second in the storm's first 2 s.
        public var stormFirst2sCallsPerSecond: Double
        /// Calls per second from 2 s after the storm's start to its end.
        public var stormCallsPerSecond: Double
        /// `stormCallsPerSecond / preStormCallsPerSecond` (target ≤ 0.25).
        public var stormToPreStormRatio: Double
        /// The busiest 1 s window from 2 s after the storm's start to its end, relative to before the storm.
        public var stormWorstSecondRatio: Double
        /// Seconds from the storm's start to the end of the first 1 s window (sliding by 100 ms) whose call rate is
        /// at most 25 % of the pre-storm rate.
        public var secondsUntilQuarterRate: Double?
        /// Seconds from the storm's end to the end of the first 1 s window with ≥ 90 % of the pre-storm call rate
        /// (target < 10).
        public var recoverySeconds: Double?
        /// Jobs that arrived.
        public var jobs: Int
        /// Jobs verified by Apple.
        public var succeeded: Int
        /// Of those, jobs that needed more than one call.
        public var succeededAfterRetry: Int
        /// Jobs ended `unverifiable` (`apple_unavailable`) because their deadline passed.
        public var unverifiableAfterDeadline: Int
        /// Jobs ended `unverifiable` (`apple_unavailable`) after `maximumAttempts` failed calls.
        public var unverifiableAttemptsExhausted: Int
        /// Jobs with no ending when the simulation ran out of events (target 0).
        public var lost: Int
        /// Calls Apple received.
        public var appleCalls: Int
        /// Calls answered 21005 or 503.
        public var throttledAnswers: Int
        /// Calls that were retries.
        public var retryCalls: Int
        /// Times the breaker opened.
        public var breakerOpenings: Int
        /// Calls Apple received in each second of the simulation.
        public var callsPerSecond: [Int]
    }

    private enum Event {
        case arrival(job: Int)
        case answer(job: Int, permit: CallPermit<ManualClock.Instant>, outcome: CallOutcome)
        case retryDue(job: Int)
        case gateWakeUp
    }

    private struct Job {
        var deadline: ManualClock.Instant
        var attempts = 0
        var ended = false
    }

    private enum Ending {
        case succeeded, afterDeadline, attemptsExhausted
    }

    /// The parameters.
    public let parameters: Parameters

    public init(parameters: Parameters = Parameters()) {
        self.parameters = parameters
    }

    /// Runs the simulation to its last event.
    public func run() -> Report {
        var run = Run(parameters: parameters)
        return run.execute()
    }

    private struct Run {
        let parameters: Parameters
        let clock = ManualClock()
        var machine: AppleCallGateStateMachine<ManualClock.Instant, Int>
        var events = EventQueue<Event>()
        var random: SplitMix64
        var jobs: [Job] = []
        var appleBusy = 0
        var calls: [Duration] = []
        var throttledAnswers = 0
        var retryCalls = 0
        var breakerOpenings = 0
        var lastBreakerState = BreakerState.closed
        var endings: [Ending: Int] = [:]
        var succeededAfterRetry = 0

        init(parameters: Parameters) {
            self.parameters = parameters
            self.random = SplitMix64(seed: parameters.seed)
            self.machine = AppleCallGateStateMachine(configuration: parameters.gate, now: clock.now)
        }

        mutating func execute() -> Report {
            let interval = Duration.seconds(1) / max(parameters.jobsPerSecond, 0.001)
            let lastArrival = parameters.stormEnd + parameters.arrivalsAfterStorm
            var arrival = Duration.zero
            var index = 0
            while arrival < lastArrival {
                events.push(at: arrival, .arrival(job: index))
                index += 1
                arrival += interval
            }
            while let (time, event) = events.pop() {
                clock.advance(to: ManualClock.Instant(offset: time))
                handle(event)
            }
            return report()
        }

        private mutating func handle(_ event: Event) {
            let now = clock.now
            switch event {
            case .arrival(let job):
                jobs.append(Job(deadline: now.advanced(by: parameters.jobDeadline)))
                enqueue(job: job, priority: .firstAttempt)
            case .retryDue(let job):
                enqueue(job: job, priority: .retry)
            case .gateWakeUp:
                perform(machine.wakeUp(now: now))
            case .answer(let job, let permit, let outcome):
                appleBusy -= 1
                perform(machine.report(permit, outcome: outcome, now: now, unixMilliseconds: clock.unixMillisecondsNow))
                noteBreaker()
                finishCall(job: job, outcome: outcome)
            }
        }

        private mutating func enqueue(job: Int, priority: CallPriority) {
            let id = machine.reserveWaiterID()
            perform(
                machine.enqueue(
                    id: id, endpoint: .verifyReceipt, priority: priority, deadline: jobs[job].deadline, payload: job,
                    now: clock.now))
        }

        private mutating func noteBreaker() {
            let state = machine.snapshot(now: clock.now).breakerState
            if state == .open, lastBreakerState != .open { breakerOpenings += 1 }
            lastBreakerState = state
        }

        private mutating func perform(_ actions: AppleCallGateStateMachine<ManualClock.Instant, Int>.Actions) {
            for (job, permit) in actions.grants {
                call(job: job, permit: permit)
            }
            for (job, _) in actions.failures {
                end(job: job, .afterDeadline)
            }
            if let wake = actions.wakeUp {
                events.push(at: wake.offset, .gateWakeUp)
            }
        }

        private mutating func call(job: Int, permit: CallPermit<ManualClock.Instant>) {
            let now = clock.now
            jobs[job].attempts += 1
            if permit.priority == .retry { retryCalls += 1 }
            calls.append(now.offset)
            let inStorm = now.offset >= parameters.stormStart && now.offset < parameters.stormEnd
            let outcome: CallOutcome
            var latency = parameters.appleLatency
            if appleBusy >= parameters.appleCapacity {
                outcome = .throttled(retryAfter: nil)
                latency = parameters.appleLatency / 10
            } else if inStorm, Double.random(in: 0..<1, using: &random) < parameters.stormFailureRatio {
                outcome = .throttled(retryAfter: nil)
            } else {
                outcome = .success(latency: latency)
            }
            if case .throttled = outcome { throttledAnswers += 1 }
            appleBusy += 1
            events.push(at: now.offset + latency, .answer(job: job, permit: permit, outcome: outcome))
        }

        private mutating func finishCall(job: Int, outcome: CallOutcome) {
            if case .success = outcome {
                if jobs[job].attempts > 1 { succeededAfterRetry += 1 }
                end(job: job, .succeeded)
                return
            }
            let remaining = clock.now.duration(to: jobs[job].deadline)
            let decision = parameters.retryPolicy.decide(
                attempt: jobs[job].attempts, outcome: outcome, remainingUntilDeadline: remaining, using: &random)
            switch decision {
            case .retry(let delay):
                events.push(at: clock.now.offset + delay, .retryDue(job: job))
            case .stop(.attemptsExhausted):
                end(job: job, .attemptsExhausted)
            case .stop:
                end(job: job, .afterDeadline)
            }
        }

        private mutating func end(job: Int, _ ending: Ending) {
            guard jobs[job].ended == false else { return }
            jobs[job].ended = true
            endings[ending, default: 0] += 1
        }

        private func report() -> Report {
            let seconds = Int((calls.last ?? .zero).seconds) + 1
            var perSecond = Array(repeating: 0, count: max(seconds, 1))
            for call in calls {
                let second = Int(call.seconds)
                if second < perSecond.count { perSecond[second] += 1 }
            }
            func rate(from start: Duration, to end: Duration) -> Double {
                let count = calls.lazy.filter { $0 >= start && $0 < end }.count
                return Double(count) / max((end - start).seconds, 1e-9)
            }
            let pre = rate(from: .seconds(10), to: parameters.stormStart)
            let stormStart = parameters.stormStart
            let stormEnd = parameters.stormEnd
            let first2 = rate(from: stormStart, to: stormStart + .seconds(2))
            let storm = rate(from: stormStart + .seconds(2), to: stormEnd)
            var worst = 0.0
            var windowStart = stormStart + .seconds(2)
            while windowStart + .seconds(1) <= stormEnd {
                worst = max(worst, rate(from: windowStart, to: windowStart + .seconds(1)))
                windowStart += .milliseconds(100)
            }
            var quarter: Double?
            var quarterEnd = stormStart + .seconds(1)
            while quarterEnd <= stormEnd {
                if rate(from: quarterEnd - .seconds(1), to: quarterEnd) <= 0.25 * pre {
                    quarter = (quarterEnd - stormStart).seconds
                    break
                }
                quarterEnd += .milliseconds(100)
            }
            var recovery: Double?
            var windowEnd = stormEnd + .seconds(1)
            let lastCall = calls.last ?? .zero
            while windowEnd <= lastCall + .seconds(1) {
                if rate(from: windowEnd - .seconds(1), to: windowEnd) >= 0.9 * pre {
                    recovery = (windowEnd - stormEnd).seconds
                    break
                }
                windowEnd += .milliseconds(100)
            }
            let ended = jobs.lazy.filter(\.ended).count
            return Report(
                preStormCallsPerSecond: pre, stormFirst2sCallsPerSecond: first2, stormCallsPerSecond: storm,
                stormToPreStormRatio: pre > 0 ? storm / pre : 0, stormWorstSecondRatio: pre > 0 ? worst / pre : 0,
                secondsUntilQuarterRate: quarter,
                recoverySeconds: recovery, jobs: jobs.count, succeeded: endings[.succeeded, default: 0],
                succeededAfterRetry: succeededAfterRetry,
                unverifiableAfterDeadline: endings[.afterDeadline, default: 0],
                unverifiableAttemptsExhausted: endings[.attemptsExhausted, default: 0], lost: jobs.count - ended,
                appleCalls: calls.count, throttledAnswers: throttledAnswers, retryCalls: retryCalls,
                breakerOpenings: breakerOpenings, callsPerSecond: perSecond)
        }
    }
}

/// A min-heap of timed events; events at the same time come out in the order they went in.
struct EventQueue<Event> {
    private var heap: [(time: Duration, sequence: UInt64, event: Event)] = []
    private var sequence: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }

    mutating func push(at time: Duration, _ event: Event) {
        sequence += 1
        heap.append((time, sequence, event))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (Duration, Event)? {
        guard heap.isEmpty == false else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, precedes(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, precedes(heap[right], heap[smallest]) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return (top.time, top.event)
    }

    private func precedes(
        _ lhs: (time: Duration, sequence: UInt64, event: Event), _ rhs: (time: Duration, sequence: UInt64, event: Event)
    ) -> Bool {
        lhs.time != rhs.time ? lhs.time < rhs.time : lhs.sequence < rhs.sequence
    }
}
