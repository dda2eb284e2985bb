import CCurl
import CCurlShim
import Foundation
import Synchronization

/// An HTTP client over one libcurl multi handle, driven by one dedicated thread.
///
/// Callers on any task submit requests through a locked queue and wait on a checked continuation; the poll
/// thread is the only thread that calls libcurl. It drives the multi handle event by event
/// (`curl_multi_socket_action` over an epoll set, see ``CurlMultiDriver``) and callers wake it through an eventfd.
/// Connections are reused through the multi handle's connection cache, easy handles are pooled, HTTP/2 is
/// negotiated over TLS and multiplexed, and TLS peer and host verification are always on.
public final class CurlHTTPEngine: HTTPTransport {
    private let shared: CurlEngineShared
    private let configuration: HTTPEngineConfiguration

    /// Starts the poll thread. Throws if libcurl cannot create a multi handle.
    public init(configuration: HTTPEngineConfiguration = HTTPEngineConfiguration()) throws {
        guard curlGlobalInitialization == CURLE_OK else {
            throw HTTPTransportError(code: .other, detail: "curl_global_init failed")
        }
        // Ownership: the multi handle and the event set belong to the poll thread's driver, which frees both
        // when the loop ends (after shutdown); nobody else frees them.
        guard let multi = curl_multi_init() else {
            throw HTTPTransportError(code: .other, detail: "curl_multi_init failed")
        }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maximumHostConnections)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maximumTotalConnections)
        // The connection cache must hold every connection we allow, or idle ones are closed and reopened.
        let cacheSize = max(configuration.maximumTotalConnections, configuration.maximumHostConnections, 64)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, cacheSize)

        let events: CurlEventSet
        do {
            events = try CurlEventSet()
        } catch {
            curl_multi_cleanup(multi)
            throw error
        }

        self.configuration = configuration
        self.shared = CurlEngineShared(wakeUp: CurlWakeUp(descriptor: events.wakeUpDescriptor))
        let driver = ThreadHandOff(
            CurlMultiDriver(multi: multi, events: events, shared: shared, configuration: configuration))
        let thread = Thread { driver.value.run() }
        thread.name = "curl-multi"
        thread.start()
    }

    deinit {
        shared.shutDown()
    }

    /// Sends `request`. Throws ``HTTPTransportError`` on transport failure, `CancellationError` when the task is
    /// cancelled (the transfer is removed from libcurl at once).
    public func execute(_ request: TransportRequest) async throws -> TransportResponse {
        guard let id = shared.reserve() else {
            throw HTTPTransportError(code: .engineShutDown, detail: "the HTTP engine was shut down")
        }
        let maximumResponseBytes = configuration.maximumResponseBytes
        let shared = self.shared
        let raw = try await withTaskCancellationHandler {
            // Unsafe rather than checked: one allocation less per call; the driver resumes each transfer once.
            try await withUnsafeThrowingContinuation {
                (continuation: UnsafeContinuation<CurlRawResponse, any Error>) in
                let transfer = CurlTransfer(
                    id: id, request: request, continuation: continuation, maximumResponseBytes: maximumResponseBytes)
                switch shared.submit(id: id, transfer: ThreadHandOff(transfer)) {
                case .accepted:
                    break
                case .cancelled:
                    continuation.resume(throwing: CancellationError())
                case .shutDown:
                    continuation.resume(
                        throwing: HTTPTransportError(code: .engineShutDown, detail: "the HTTP engine was shut down"))
                }
            }
        } onCancel: {
            shared.cancel(id: id)
        }
        // Header lines are parsed here, on the caller's task, to keep the poll thread's work per transfer small.
        return TransportResponse(status: raw.status, headers: raw.parsedHeaders(), body: raw.body)
    }

    /// Stops the poll thread: requests in flight fail with `engineShutDown`, later ones are refused.
    /// Returns at once; the thread finishes on its own.
    public func shutdown() {
        shared.shutDown()
    }

    /// Counters for benchmarks and tests.
    public var statistics: Statistics { shared.statistics() }

    /// What the engine has done so far.
    public struct Statistics: Sendable {
        /// Requests that finished (answered or failed).
        public var completed: Int
        /// New connections libcurl opened (sum of `CURLINFO_NUM_CONNECTS`).
        public var connectionsOpened: Int
        /// Turns of the poll loop.
        public var loopIterations: Int
        /// Time the poll thread spent working rather than waiting in `epoll_wait`.
        public var busyTime: Duration
        /// Transfers in libcurl right now.
        public var inFlight: Int
    }
}

/// libcurl's global initialisation, done once per process before the first handle is made.
private let curlGlobalInitialization: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

/// Moves a value that is not `Sendable` to the one thread that owns it from then on.
///
/// Safe because whoever wraps the value gives it up at the hand-off: after it, only the receiving thread (the
/// curl poll thread) touches the value, so it is never used from two threads at once.
struct ThreadHandOff<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

// MARK: - State shared between callers and the poll thread

/// The part of the engine that callers and the poll thread share: a locked state machine and counters.
final class CurlEngineShared: Sendable {
    private let state: Mutex<CurlEngineState>
    let completed = Atomic<Int>(0)
    let connectionsOpened = Atomic<Int>(0)
    let loopIterations = Atomic<Int>(0)
    let busyNanoseconds = Atomic<Int>(0)
    let inFlight = Atomic<Int>(0)

    init(wakeUp: CurlWakeUp) {
        state = Mutex(CurlEngineState(wakeUp: wakeUp))
    }

    func reserve() -> UInt64? { state.withLock { $0.reserve() } }

    func submit(id: UInt64, transfer: ThreadHandOff<CurlTransfer>) -> CurlEngineState.SubmitResult {
        state.withLock { state in
            let result = state.submit(id: id, transfer: transfer)
            if result == .accepted { state.wakeUp() }
            return result
        }
    }

    func cancel(id: UInt64) {
        state.withLock { state in
            if state.cancel(id: id) { state.wakeUp() }
        }
    }

    func shutDown() {
        state.withLock { state in
            state.isShutDown = true
            state.wakeUp()
        }
    }

    func takeWork() -> CurlEngineState.Work { state.withLock { $0.takeWork() } }

    func finished(id: UInt64) { state.withLock { $0.finished(id: id) } }

    /// Called by the poll thread before it closes the eventfd, so that no caller writes to a closed descriptor.
    func forgetWakeUp() { state.withLock { $0.wakeUpSignal = nil } }

    func statistics() -> CurlHTTPEngine.Statistics {
        CurlHTTPEngine.Statistics(
            completed: completed.load(ordering: .relaxed),
            connectionsOpened: connectionsOpened.load(ordering: .relaxed),
            loopIterations: loopIterations.load(ordering: .relaxed),
            busyTime: .nanoseconds(busyNanoseconds.load(ordering: .relaxed)),
            inFlight: inFlight.load(ordering: .relaxed))
    }
}

/// Which requests exist and what the poll thread must do next. Mutated only under `CurlEngineShared`'s lock.
struct CurlEngineState {
    enum Entry {
        /// An id was handed out; the transfer is not submitted yet.
        case reserved
        /// The task was cancelled before its transfer was submitted.
        case cancelledEarly
        /// Submitted to (or already running on) the poll thread.
        case submitted
    }

    enum SubmitResult: Equatable {
        case accepted, cancelled, shutDown
    }

    struct Work {
        var submissions: [ThreadHandOff<CurlTransfer>]
        var cancellations: [UInt64]
        var isShutDown: Bool
    }

    /// Nil once the poll thread has ended (it clears this under the lock before closing the eventfd).
    var wakeUpSignal: CurlWakeUp?
    var entries: [UInt64: Entry] = [:]
    var nextID: UInt64 = 0
    var submissions: [ThreadHandOff<CurlTransfer>] = []
    var cancellations: [UInt64] = []
    var isShutDown = false
    /// A wake-up was sent and the poll thread has not taken its work since: another one would be redundant.
    var wakeUpPending = false

    init(wakeUp: CurlWakeUp) {
        self.wakeUpSignal = wakeUp
    }

    mutating func reserve() -> UInt64? {
        guard !isShutDown else { return nil }
        nextID &+= 1
        entries[nextID] = .reserved
        return nextID
    }

    mutating func submit(id: UInt64, transfer: ThreadHandOff<CurlTransfer>) -> SubmitResult {
        if isShutDown {
            entries[id] = nil
            return .shutDown
        }
        switch entries[id] {
        case .reserved:
            entries[id] = .submitted
            submissions.append(transfer)
            return .accepted
        case .cancelledEarly, .submitted, nil:
            entries[id] = nil
            return .cancelled
        }
    }

    /// Returns whether the poll thread must be woken to remove a running transfer.
    mutating func cancel(id: UInt64) -> Bool {
        switch entries[id] {
        case .reserved:
            entries[id] = .cancelledEarly
            return false
        case .submitted:
            cancellations.append(id)
            return true
        case .cancelledEarly, nil:
            return false  // already finished, or cancelled twice
        }
    }

    mutating func takeWork() -> Work {
        defer {
            submissions.removeAll(keepingCapacity: true)
            cancellations.removeAll(keepingCapacity: true)
            wakeUpPending = false
        }
        return Work(submissions: submissions, cancellations: cancellations, isShutDown: isShutDown)
    }

    mutating func finished(id: UInt64) {
        entries[id] = nil
    }

    mutating func wakeUp() {
        guard !wakeUpPending, let wakeUpSignal else { return }
        wakeUpPending = true
        wakeUpSignal.signal()
    }
}
