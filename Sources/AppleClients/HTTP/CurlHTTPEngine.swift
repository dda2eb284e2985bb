import CCurl
import CCurlShim
import Foundation
import Synchronization

/// An HTTP client over one libcurl multi handle, driven by one dedicated thread.
///
/// Callers on any task submit requests through a locked queue and wait on a checked continuation; the poll
/// thread is the only thread that calls libcurl (apart from `curl_multi_wakeup`, which libcurl documents as
/// callable from any thread). Connections are reused through the multi handle's connection cache, HTTP/2 is
/// negotiated over TLS and multiplexed, and TLS peer and host verification are always on.
public final class CurlHTTPEngine: HTTPTransport {
    private let shared: CurlEngineShared
    private let configuration: HTTPEngineConfiguration

    /// Starts the poll thread. Throws if libcurl cannot create a multi handle.
    public init(configuration: HTTPEngineConfiguration = HTTPEngineConfiguration()) throws {
        guard curlGlobalInitialization == CURLE_OK else {
            throw HTTPTransportError(code: .other, detail: "curl_global_init failed")
        }
        // Ownership: the multi handle belongs to the poll thread's driver, which calls curl_multi_cleanup
        // when the loop ends (after shutdown); nobody else frees it.
        guard let multi = curl_multi_init() else {
            throw HTTPTransportError(code: .other, detail: "curl_multi_init failed")
        }
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxHostConnections)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxTotalConnections)
        // The connection cache must hold every connection we allow, or idle ones are closed and reopened.
        let cacheSize = max(configuration.maxTotalConnections, configuration.maxHostConnections, 64)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, cacheSize)

        self.configuration = configuration
        self.shared = CurlEngineShared(multi: multi)
        let driver = ThreadHandOff(CurlMultiDriver(multi: multi, shared: shared, configuration: configuration))
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
        let maxResponseBytes = configuration.maxResponseBytes
        let shared = self.shared
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<TransportResponse, any Error>) in
                let transfer = CurlTransfer(
                    id: id, request: request, continuation: continuation, maxResponseBytes: maxResponseBytes)
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
        /// Time the poll thread spent working rather than waiting in `curl_multi_poll`.
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
private final class CurlEngineShared: Sendable {
    private let state: Mutex<CurlEngineState>
    let completed = Atomic<Int>(0)
    let connectionsOpened = Atomic<Int>(0)
    let loopIterations = Atomic<Int>(0)
    let busyNanoseconds = Atomic<Int>(0)
    let inFlight = Atomic<Int>(0)

    init(multi: UnsafeMutableRawPointer) {
        state = Mutex(CurlEngineState(multi: CurlMultiAddress(pointer: multi)))
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

    /// Called by the poll thread just before `curl_multi_cleanup`, so no caller wakes a freed handle.
    func forgetMulti() { state.withLock { $0.multi = nil } }

    func statistics() -> CurlHTTPEngine.Statistics {
        CurlHTTPEngine.Statistics(
            completed: completed.load(ordering: .relaxed),
            connectionsOpened: connectionsOpened.load(ordering: .relaxed),
            loopIterations: loopIterations.load(ordering: .relaxed),
            busyTime: .nanoseconds(busyNanoseconds.load(ordering: .relaxed)),
            inFlight: inFlight.load(ordering: .relaxed))
    }
}

/// The address of the multi handle, kept only so that callers can wake the poll thread.
///
/// Safe to share because it is read only under the state lock, and `curl_multi_wakeup` is the one libcurl call
/// documented as safe from any thread; the poll thread clears it under the same lock before freeing the handle.
private struct CurlMultiAddress: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

/// Which requests exist and what the poll thread must do next. Mutated only under `CurlEngineShared`'s lock.
private struct CurlEngineState {
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

    var multi: CurlMultiAddress?
    var entries: [UInt64: Entry] = [:]
    var nextID: UInt64 = 0
    var submissions: [ThreadHandOff<CurlTransfer>] = []
    var cancellations: [UInt64] = []
    var isShutDown = false
    /// A wake-up was sent and the poll thread has not taken its work since: another one would be redundant.
    var wakeUpPending = false

    init(multi: CurlMultiAddress) {
        self.multi = multi
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
        guard !wakeUpPending, let multi else { return }
        wakeUpPending = true
        _ = curl_multi_wakeup(multi.pointer)
    }
}

// MARK: - One transfer

/// One request in flight: its continuation and the response being collected.
///
/// Created by the caller, then owned by the poll thread from hand-off until it resumes the continuation.
private final class CurlTransfer {
    let id: UInt64
    let request: TransportRequest
    let continuation: CheckedContinuation<TransportResponse, any Error>
    let maxResponseBytes: Int
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var exceededLimit = false
    /// Owned by this transfer: built by `curl_slist_append`, freed with `curl_slist_free_all` in `deinit`
    /// (the transfer outlives the easy handle's use of it, which ends at `curl_multi_remove_handle`).
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// Owned by this transfer: allocated here, freed in `deinit`; libcurl writes its error text into it.
    let errorBuffer: UnsafeMutablePointer<CChar>

    init(
        id: UInt64, request: TransportRequest, continuation: CheckedContinuation<TransportResponse, any Error>,
        maxResponseBytes: Int
    ) {
        self.id = id
        self.request = request
        self.continuation = continuation
        self.maxResponseBytes = maxResponseBytes
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    var errorText: String { String(cString: errorBuffer) }
}

/// libcurl's write callback: appends body bytes, or aborts the transfer (by returning 0) past the size limit.
private func curlWriteCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard transfer.body.count + length <= transfer.maxResponseBytes else {
        transfer.exceededLimit = true
        return 0
    }
    if let data, length > 0 {
        transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
    }
    return length
}

/// libcurl's header callback: one raw header line per call. A status line starts a new response (after a
/// `100 Continue`), so the headers collected so far are dropped.
private func curlHeaderCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let context, let data else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        transfer.headers.removeAll()
    } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        if transfer.headers.count < 200 { transfer.headers.append((name, value)) }
    }
    return length
}

// MARK: - The poll thread

/// Everything only the poll thread touches: the multi handle, the running transfers and the idle easy handles.
private final class CurlMultiDriver {
    /// Owned by this driver: freed with `curl_multi_cleanup` at the end of `run()`.
    private let multi: UnsafeMutableRawPointer
    private let shared: CurlEngineShared
    private let configuration: HTTPEngineConfiguration
    /// Running transfers by easy handle. The dictionary keeps each transfer alive while libcurl holds its address.
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var easyByID: [UInt64: UnsafeMutableRawPointer] = [:]
    /// Idle easy handles, owned by this driver: reused, or freed with `curl_easy_cleanup` at the end of `run()`
    /// or when the pool is full.
    private var idleEasyHandles: [UnsafeMutableRawPointer] = []

    init(multi: UnsafeMutableRawPointer, shared: CurlEngineShared, configuration: HTTPEngineConfiguration) {
        self.multi = multi
        self.shared = shared
        self.configuration = configuration
    }

    func run() {
        let clock = ContinuousClock()
        while true {
            let started = clock.now
            let work = shared.takeWork()
            for submission in work.submissions { start(submission.value) }
            for id in work.cancellations { cancel(id: id) }
            if work.isShutDown { break }

            var stillRunning: Int32 = 0
            _ = curl_multi_perform(multi, &stillRunning)
            collectFinished()
            shared.loopIterations.add(1, ordering: .relaxed)
            shared.busyNanoseconds.add(nanoseconds(started.duration(to: clock.now)), ordering: .relaxed)

            var descriptors: Int32 = 0
            // Woken early by curl_multi_wakeup (new work) or by socket activity; 1 s caps a lost wake-up.
            _ = curl_multi_poll(multi, nil, 0, 1000, &descriptors)
        }
        let transfers = Array(running.keys)
        for easy in transfers {
            finish(easy: easy, with: .failure(HTTPTransportError(code: .engineShutDown, detail: "engine shut down")))
        }
        for easy in idleEasyHandles { curl_easy_cleanup(easy) }
        idleEasyHandles.removeAll()
        shared.forgetMulti()
        curl_multi_cleanup(multi)
    }

    private func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }

    private func start(_ transfer: CurlTransfer) {
        // Ownership: a handle from the pool or a new one; it goes back to the pool (or curl_easy_cleanup) in
        // `finish`.
        guard let easy = idleEasyHandles.popLast() ?? curl_easy_init() else {
            shared.finished(id: transfer.id)
            transfer.continuation.resume(
                throwing: HTTPTransportError(code: .other, detail: "curl_easy_init failed"))
            return
        }
        running[easy] = transfer
        easyByID[transfer.id] = easy
        shared.inFlight.add(1, ordering: .relaxed)
        if let failure = configure(easy: easy, for: transfer) {
            finish(easy: easy, with: .failure(failure), removeFromMulti: false)
            return
        }
        let added = curl_multi_add_handle(multi, easy)
        if added != CURLM_OK {
            let text = String(cString: curl_multi_strerror(added))
            finish(easy: easy, with: .failure(HTTPTransportError(code: .other, detail: text)), removeFromMulti: false)
        }
    }

    /// Sets every option of one transfer. Returns the error of the first option libcurl refuses.
    private func configure(easy: UnsafeMutableRawPointer, for transfer: CurlTransfer) -> HTTPTransportError? {
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        var results: [CURLcode] = []
        func set(_ option: CURLoption, _ value: Int) { results.append(ccurl_easy_setopt_long(easy, option, value)) }
        func set(_ option: CURLoption, _ value: String) {
            results.append(ccurl_easy_setopt_string(easy, option, value))
        }

        set(CURLOPT_URL, request.url)
        // Only web protocols, and never a redirect: a job must never make the worker call another host.
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_REDIR_PROTOCOLS_STR, "https")
        set(CURLOPT_FOLLOWLOCATION, 0)
        set(CURLOPT_MAXREDIRS, 0)
        // TLS verification is always on; there is deliberately no way to turn it off.
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        if let caBundle = configuration.caBundlePath { set(CURLOPT_CAINFO, caBundle) }
        set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        if request.url.lowercased().hasPrefix("https:") {
            // Wait for an HTTP/2 connection being set up rather than opening a parallel one.
            set(CURLOPT_PIPEWAIT, 1)
        }
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_TCP_KEEPALIVE, 1)
        set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.roundedUpMilliseconds)
        set(CURLOPT_TIMEOUT_MS, (request.timeout ?? configuration.requestTimeout).roundedUpMilliseconds)
        set(CURLOPT_USERAGENT, configuration.userAgent)
        results.append(ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer))
        results.append(ccurl_easy_setopt_write_callback(easy, curlWriteCallback))
        results.append(ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        results.append(ccurl_easy_setopt_header_callback(easy, curlHeaderCallback))
        results.append(ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context))

        var list: UnsafeMutablePointer<curl_slist>? = nil
        for header in request.headers {
            list = curl_slist_append(list, "\(header.name): \(header.value)")
        }
        switch request.method {
        case .get:
            set(CURLOPT_HTTPGET, 1)
        case .post:
            // No `Expect: 100-continue` round trip before the body.
            list = curl_slist_append(list, "Expect:")
            let body = request.body ?? []
            set(CURLOPT_POST, 1)
            set(CURLOPT_POSTFIELDSIZE, body.count)
            // COPYPOSTFIELDS copies the body, so the Swift array need not outlive this call.
            let copied = body.withUnsafeBytes { bytes -> CURLcode in
                let address = bytes.baseAddress ?? UnsafeRawPointer(("" as StaticString).utf8Start)
                return ccurl_easy_setopt_pointer(
                    easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: address))
            }
            results.append(copied)
        }
        transfer.headerList = list
        if let list { results.append(ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)) }

        if let failed = results.first(where: { $0 != CURLE_OK }) {
            return HTTPTransportError(
                code: .invalidRequest, curlCode: Int(failed.rawValue),
                detail: String(cString: curl_easy_strerror(failed)))
        }
        return nil
    }

    private func cancel(id: UInt64) {
        guard let easy = easyByID[id] else { return }  // finished meanwhile
        finish(easy: easy, with: .failure(CancellationError()))
    }

    private func collectFinished() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            guard let transfer = running[easy] else { continue }
            if code == CURLE_OK {
                var status = 0
                _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
                let response = TransportResponse(status: status, headers: transfer.headers, body: transfer.body)
                finish(easy: easy, with: .success(response))
            } else {
                finish(easy: easy, with: .failure(transportError(code, transfer: transfer)))
            }
        }
    }

    /// Removes the transfer from libcurl, recycles its easy handle and resumes its continuation.
    private func finish(
        easy: UnsafeMutableRawPointer, with result: Result<TransportResponse, any Error>,
        removeFromMulti: Bool = true
    ) {
        guard let transfer = running.removeValue(forKey: easy) else { return }
        easyByID[transfer.id] = nil
        if removeFromMulti { _ = curl_multi_remove_handle(multi, easy) }
        var connects = 0
        if ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK {
            shared.connectionsOpened.add(connects, ordering: .relaxed)
        }
        // curl_easy_reset keeps the handle's caches but drops every option, including our callbacks' context.
        curl_easy_reset(easy)
        if idleEasyHandles.count < configuration.easyHandlePoolSize {
            idleEasyHandles.append(easy)
        } else {
            curl_easy_cleanup(easy)
        }
        shared.inFlight.subtract(1, ordering: .relaxed)
        shared.completed.add(1, ordering: .relaxed)
        shared.finished(id: transfer.id)
        transfer.continuation.resume(with: result)
    }

    private func transportError(_ code: CURLcode, transfer: CurlTransfer) -> HTTPTransportError {
        let text = transfer.errorText.isEmpty ? String(cString: curl_easy_strerror(code)) : transfer.errorText
        let curlCode = Int(code.rawValue)
        if transfer.exceededLimit {
            return HTTPTransportError(
                code: .responseTooLarge, curlCode: curlCode,
                detail: "response body exceeds \(transfer.maxResponseBytes) bytes")
        }
        let category: HTTPTransportError.Code
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            category = .connectFailed
        case CURLE_OPERATION_TIMEDOUT:
            category = .timeout
        case CURLE_SSL_CONNECT_ERROR:
            category = .tlsHandshakeFailed
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
            CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE:
            category = .tlsVerificationFailed
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2,
            CURLE_HTTP2_STREAM:
            category = .connectionLost
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT, CURLE_TOO_MANY_REDIRECTS:
            category = .invalidRequest
        case CURLE_ABORTED_BY_CALLBACK:
            category = .cancelled
        default:
            category = .other
        }
        return HTTPTransportError(code: category, curlCode: curlCode, detail: text)
    }
}
