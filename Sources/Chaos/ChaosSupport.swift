import AppleClients
import Foundation
import Messages
import Operations
import StoreHTTP
import Synchronization
import Traffic

#if canImport(Glibc)
    import Glibc
#endif

/// Small HTTP calls of the harness (readiness probes, the simulator's fault and stats endpoints, workers'
/// `/metrics`): the harness talks only to loopback services it started. Through the project's curl engine, not
/// URLSession: on Linux URLSession watches curl's sockets with dispatch sources, and a socket closed under its source
/// crashed the process in libdispatch (`_dispatch_event_loop_drain`) while the harness polled workers it had just
/// stopped (refused connections are the known trigger).
enum ChaosHTTP {
    static let engine = Result { try CurlHTTPEngine() }

    private static func execute(_ request: TransportRequest) async -> TransportResponse? {
        guard let engine = try? engine.get() else { return nil }
        return try? await engine.execute(request)
    }

    private static func postJSON(_ url: String, json: String) async -> TransportResponse? {
        guard let engine = try? engine.get() else { return nil }
        return try? await engine.postJSON(url, body: Array(json.utf8), timeout: .seconds(5))
    }

    /// The status code of a GET, or nil when nothing answered.
    static func status(_ url: String) async -> Int? {
        await execute(TransportRequest(url: url, timeout: .seconds(5)))?.status
    }

    /// The body of a GET.
    static func get(_ url: String) async -> Data? {
        await execute(TransportRequest(url: url, timeout: .seconds(5))).map { Data($0.body) }
    }

    /// Status and body of a GET with a bearer token, or nil when nothing answered.
    static func getAuthorized(_ url: String, token: String) async -> (status: Int, body: [UInt8])? {
        await execute(
            TransportRequest(url: url, headers: [("Authorization", "Bearer \(token)")], timeout: .seconds(10))
        ).map { ($0.status, $0.body) }
    }

    /// POSTs a JSON body; true on a 2xx answer.
    @discardableResult
    static func post(_ url: String, json: String) async -> Bool {
        await postJSON(url, json: json).map { (200..<300).contains($0.status) } ?? false
    }

    /// POSTs a JSON body; the status and the JSON object answered, or nil when nothing answered.
    static func postForAnswer(_ url: String, json: String) async -> (status: Int, object: [String: Any])? {
        await postJSON(url, json: json).map {
            ($0.status, ((try? JSONSerialization.jsonObject(with: Data($0.body))) as? [String: Any]) ?? [:])
        }
    }
}

/// A free TCP port on loopback (``FreeLocalPort``), or a random high one when none could be picked: a child that
/// cannot bind it then fails its start like any other.
func chaosFreePort() -> Int {
    (try? FreeLocalPort.pick()) ?? Int.random(in: 20_000...40_000)
}

/// Every verdict and dead letter read back, shared by the reader task and the fault schedule (which waits on it to
/// measure recovery).
final class ChaosTally: Sendable {
    private struct State {
        var verdicts: [Verdict] = []
        var decided = Set<String>()
        var deadLetters: [(key: String, reason: String)] = []
        var deadLettered = Set<String>()
        var unreadable = 0
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// Bytes submitted per job id / dead-letter key that has not settled yet (the flow-control window).
        var pendingJobs: [String: Int] = [:]
        var pendingLetters: [String: Int] = [:]
        var outstandingBytes = 0
        var roomWaiters: [(limit: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// Job ids and malformed keys the run waits for.
        var expectedJobs: Set<String>
        var expectedDeadLetters: Set<String>
        /// Without kept records (the live fuzz run): outcomes counted, and what broke its promise.
        var outcomes: [String: Int] = [:]
        var notRejected: [String] = []
        var unexpected: [String] = []
    }

    private let state: Mutex<State>
    /// Keep every verdict and dead letter (the chaos run's checker needs them); off for the live fuzz run, whose
    /// million inputs are checked as they arrive.
    private let keepsRecords: Bool

    init(expectedJobs: Set<String>, expectedDeadLetters: Set<String>, keepsRecords: Bool = true) {
        self.state = Mutex(State(expectedJobs: expectedJobs, expectedDeadLetters: expectedDeadLetters))
        self.keepsRecords = keepsRecords
    }

    func received(verdict: Verdict) {
        resume { state in
            if keepsRecords {
                state.verdicts.append(verdict)
            } else {
                state.outcomes[verdict.outcome.rawValue, default: 0] += 1
                if !state.expectedJobs.contains(verdict.jobID) {
                    state.unexpected.append("verdict for job \(verdict.jobID.prefix(64)), never submitted")
                } else if verdict.outcome != .rejected {
                    state.notRejected.append("job \(verdict.jobID.prefix(64)) ended \(verdict.outcome.rawValue)")
                }
            }
            if state.expectedJobs.contains(verdict.jobID) { state.decided.insert(verdict.jobID) }
            if let bytes = state.pendingJobs.removeValue(forKey: verdict.jobID) { state.outstandingBytes -= bytes }
        }
    }

    func received(deadLetterKey key: String, reason: String) {
        resume { state in
            if keepsRecords {
                state.deadLetters.append((key, reason))
            } else {
                state.outcomes["dead_letter", default: 0] += 1
                if !state.expectedDeadLetters.contains(key) {
                    state.unexpected.append("dead letter \(key.prefix(64)) (\(reason)), not expected")
                }
            }
            if state.expectedDeadLetters.contains(key) { state.deadLettered.insert(key) }
            if let bytes = state.pendingLetters.removeValue(forKey: key) { state.outstandingBytes -= bytes }
        }
    }

    /// The live fuzz run's findings: outcome counts, jobs not rejected, verdicts or dead letters not expected.
    var findings: (outcomes: [String: Int], notRejected: [String], unexpected: [String]) {
        state.withLock { ($0.outcomes, $0.notRejected, $0.unexpected) }
    }

    /// A message of `bytes` bytes is about to be produced: it counts against the window until its job id has a
    /// verdict (or, for a non-job, its key a dead letter). A job id already decided adds nothing.
    func submitting(jobID: String?, deadLetterKey: String, bytes: Int, expect: Bool = false) {
        state.withLock { state in
            if expect {
                if let jobID {
                    state.expectedJobs.insert(jobID)
                } else {
                    state.expectedDeadLetters.insert(deadLetterKey)
                }
            }
            if let jobID {
                guard !state.decided.contains(jobID) else { return }
                state.pendingJobs[jobID, default: 0] += bytes
            } else {
                guard !state.deadLettered.contains(deadLetterKey) else { return }
                state.pendingLetters[deadLetterKey, default: 0] += bytes
            }
            state.outstandingBytes += bytes
        }
    }

    /// Bytes produced whose message has not settled yet.
    var outstandingBytes: Int { state.withLock { $0.outstandingBytes } }

    /// Job ids and dead-letter keys submitted and not settled yet.
    var unsettled: (jobs: Set<String>, deadLetters: Set<String>) {
        state.withLock { (Set($0.pendingJobs.keys), Set($0.pendingLetters.keys)) }
    }

    /// Waits until at most `limit` bytes are outstanding, at most `timeout`; true when they were.
    func waitForRoom(limit: Int, within timeout: Duration) async -> Bool {
        // The common case, once per message: no task group, no timer.
        if state.withLock({ $0.outstandingBytes <= limit }) { return true }
        return await wait(within: timeout, rooms: true) { state, continuation in
            if state.outstandingBytes <= limit { return true }
            state.roomWaiters.append((limit, continuation))
            return false
        }
    }

    func unreadable() { state.withLock { $0.unreadable += 1 } }

    /// Expected jobs with a verdict plus expected dead letters seen: the run's progress.
    var settled: Int { state.withLock { $0.decided.count + $0.deadLettered.count } }

    var snapshot: (verdicts: [Verdict], deadLetters: [(key: String, reason: String)], unreadable: Int) {
        state.withLock { ($0.verdicts, $0.deadLetters, $0.unreadable) }
    }

    /// Waits until `count` messages are settled, at most `limit`; true when they were.
    func waitUntilSettled(_ count: Int, within limit: Duration) async -> Bool {
        await wait(within: limit, rooms: false) { state, continuation in
            if state.decided.count + state.deadLettered.count >= count { return true }
            state.waiters.append((count, continuation))
            return false
        }
    }

    /// Waits until `park` finds the condition met, or is resumed after parking its continuation, at most `limit`;
    /// true when the condition was met. At the limit it releases the parked waiters of its kind (`rooms` or not).
    private func wait(
        within limit: Duration, rooms: Bool,
        park: @escaping @Sendable (inout State, CheckedContinuation<Void, Never>) -> Bool
    ) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let ready = self.state.withLock { park(&$0, continuation) }
                    if ready { continuation.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            if !first { self.releaseAll(rooms: rooms) }
            return first
        }
    }

    /// Resumes the waiters of one kind (a wait timed out: its continuation must not leak). The harness has at most
    /// one wait of each kind at a time.
    private func releaseAll(rooms: Bool) {
        let waiters = state.withLock { state in
            if rooms {
                defer { state.roomWaiters = [] }
                return state.roomWaiters.map(\.continuation)
            }
            defer { state.waiters = [] }
            return state.waiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }

    private func resume(_ update: (inout State) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            update(&state)
            let settled = state.decided.count + state.deadLettered.count
            var ready = state.waiters.filter { $0.count <= settled }.map(\.continuation)
            state.waiters.removeAll { $0.count <= settled }
            let bytes = state.outstandingBytes
            ready += state.roomWaiters.filter { $0.limit >= bytes }.map(\.continuation)
            state.roomWaiters.removeAll { $0.limit >= bytes }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }
}

/// A loopback listener that URL bait in the adversarial corpus points at: an HTTP request for its path means a worker
/// followed a URL found in a job.
final class ChaosCanary: Sendable {
    let port: Int
    private let descriptor: Int32
    private let connections = ChaosCounter()

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChaosError("canary: socket() failed") }
        guard let port = FreeLocalPort.bindLoopback(fd), listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw ChaosError("canary: cannot listen on loopback")
        }
        descriptor = fd
        self.port = port
        let thread = Thread { [connections] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return
                }
                // Only an HTTP request for the bait's path counts: parallel tests' Kafka clients reconnecting to a
                // port a downed broker gave up (which the kernel may hand to this listener) are not a worker
                // following a URL.
                var timeout = timeval(tv_sec: 2, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var buffer = [UInt8](repeating: 0, count: 1024)
                let count = recv(client, &buffer, buffer.count, 0)
                let head = count > 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : ""
                if head.contains(" /bait") { connections.increment() }
                Glibc.close(client)
            }
        }
        thread.name = "chaos-canary"
        thread.start()
    }

    var url: String { "http://127.0.0.1:\(port)/bait" }

    /// HTTP requests for the bait's path so far.
    var hits: Int { connections.value }

    /// Stops listening (the accept loop then ends).
    func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}

/// A counter shared with a thread.
final class ChaosCounter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
