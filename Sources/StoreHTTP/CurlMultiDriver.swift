import CCurl
import CCurlShim
import Glibc
import Synchronization

/// The value of `CURL_SOCKET_TIMEOUT` (a nested macro Swift does not import): "the timer expired, not a socket".
private let curlSocketTimeout: curl_socket_t = -1

/// Everything only the poll thread touches: the multi handle, its epoll set, the running transfers and the idle
/// easy handles.
///
/// libcurl is driven with `curl_multi_socket_action`: libcurl says which sockets to watch through the socket
/// callback and when to wake it through the timer callback; each turn of the loop waits in `epoll_wait` and hands
/// libcurl only the sockets that are ready. The cost of a turn therefore follows the number of ready sockets,
/// not the number of open connections (which `curl_multi_poll` rebuilt and scanned on every turn).
final class CurlMultiDriver {
    /// Owned by this driver: freed with `curl_multi_cleanup` at the end of `run()`.
    private let multi: UnsafeMutableRawPointer
    /// Owned by this driver: closed at the end of `run()`, after the multi handle.
    private let events: CurlEventSet
    private let shared: CurlEngineShared
    private let configuration: HTTPEngineConfiguration
    /// When libcurl wants `CURL_SOCKET_TIMEOUT` next; nil: no timer.
    private var timerDeadline: ContinuousClock.Instant?
    private let clock = ContinuousClock()
    /// Running transfers by easy handle address; the dictionary keeps both alive while libcurl holds them.
    private var running: [UnsafeMutableRawPointer: (easy: CurlEasyHandle, transfer: CurlTransfer)] = [:]
    private var easyByID: [UInt64: UnsafeMutableRawPointer] = [:]
    /// Idle easy handles, configured and ready for the next transfer (freed when the driver ends).
    private var idleEasyHandles: [CurlEasyHandle] = []

    init(
        multi: UnsafeMutableRawPointer, events: CurlEventSet, shared: CurlEngineShared,
        configuration: HTTPEngineConfiguration
    ) {
        self.multi = multi
        self.events = events
        self.shared = shared
        self.configuration = configuration
    }

    func run() {
        // The callbacks receive this driver unretained: `run()` outlives every call libcurl makes to them, the
        // last being inside `curl_multi_cleanup` below.
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_multi_setopt_socket_callback(multi, curlSocketCallback, context)
        _ = ccurl_multi_setopt_timer_callback(multi, curlTimerCallback, context)

        var busySince = clock.now
        while true {
            let work = shared.takeWork()
            for submission in work.submissions { start(submission.value) }
            for id in work.cancellations { cancel(id: id) }
            if work.isShutDown { break }

            let timeout = waitMilliseconds()
            shared.busyNanoseconds.add(nanoseconds(busySince.duration(to: clock.now)), ordering: .relaxed)
            let ready = events.wait(timeoutMilliseconds: timeout)
            busySince = clock.now

            var stillRunning: Int32 = 0
            for event in ready {
                let socket = event.data.fd
                if socket == events.wakeUpDescriptor {
                    // The work it announces is taken at the top of the next turn.
                    events.drainWakeUp()
                    continue
                }
                if events.isParked(socket) {
                    // An idle connection libcurl does not watch became readable (the peer closed it): stop
                    // watching it; libcurl finds it dead when it next tries to reuse it.
                    events.remove(socket)
                    continue
                }
                var flags: Int32 = 0
                if event.events & EPOLLIN.rawValue != 0 { flags |= CURL_CSELECT_IN }
                if event.events & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
                if event.events & EPOLLERR.rawValue != 0 { flags |= CURL_CSELECT_ERR }
                _ = curl_multi_socket_action(multi, socket, flags, &stillRunning)
            }
            if let deadline = timerDeadline, deadline <= clock.now {
                // Cleared first: libcurl sets its next timer from inside this call.
                timerDeadline = nil
                _ = curl_multi_socket_action(multi, curlSocketTimeout, 0, &stillRunning)
            }
            collectFinished()
            shared.loopIterations.add(1, ordering: .relaxed)
        }

        for easy in Array(running.keys) {
            finish(easy: easy, with: .failure(HTTPTransportError(code: .engineShutDown, detail: "engine shut down")))
        }
        idleEasyHandles.removeAll()
        shared.forgetWakeUp()
        curl_multi_cleanup(multi)
        events.close()
    }

    /// How long `epoll_wait` may block: until libcurl's timer, at most `idleWaitLimit` (1 s; a safety net, since
    /// wake-ups are explicit).
    private func waitMilliseconds() -> Int32 {
        let limit = Int32(clamping: configuration.idleWaitLimit.roundedUpMilliseconds)
        guard let deadline = timerDeadline else { return limit }
        let remaining = clock.now.duration(to: deadline)
        guard remaining > .zero else { return 0 }
        return Int32(clamping: min(remaining.roundedUpMilliseconds, Int(limit)))
    }

    // MARK: libcurl's callbacks

    fileprivate func socketChanged(_ socket: curl_socket_t, what: Int32) {
        switch what {
        case CURL_POLL_REMOVE:
            events.forget(socket)
        default:
            events.watch(
                socket, readable: what & CURL_POLL_IN != 0, writable: what & CURL_POLL_OUT != 0)
        }
    }

    fileprivate func timerChanged(milliseconds: Int) {
        timerDeadline = milliseconds < 0 ? nil : clock.now.advanced(by: .milliseconds(milliseconds))
    }

    // MARK: Transfers

    private func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }

    private func start(_ transfer: CurlTransfer) {
        let easy: CurlEasyHandle
        if let idle = idleEasyHandles.popLast() {
            easy = idle
        } else {
            switch CurlEasyHandle.make(configuration: configuration) {
            case .success(let made):
                easy = made
            case .failure(let error):
                shared.finished(id: transfer.id)
                transfer.continuation.resume(throwing: error)
                return
            }
        }
        running[easy.pointer] = (easy, transfer)
        easyByID[transfer.id] = easy.pointer
        shared.inFlight.add(1, ordering: .relaxed)
        if let failure = easy.prepare(for: transfer, defaultTimeout: configuration.requestTimeout) {
            finish(easy: easy.pointer, with: .failure(failure), removeFromMulti: false)
            return
        }
        let added = curl_multi_add_handle(multi, easy.pointer)
        if added != CURLM_OK {
            let text = String(cString: curl_multi_strerror(added))
            finish(
                easy: easy.pointer, with: .failure(HTTPTransportError(code: .other, detail: text)),
                removeFromMulti: false)
        }
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
            guard let (handle, transfer) = running[easy] else { continue }
            if code == CURLE_OK {
                var status = 0
                _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
                let response = CurlRawResponse(status: status, headerBytes: transfer.headerBytes, body: transfer.body)
                finish(easy: easy, with: .success(response))
            } else {
                finish(easy: easy, with: .failure(transportError(code, easy: handle, transfer: transfer)))
            }
        }
    }

    /// Removes the transfer from libcurl, returns its easy handle to the pool and resumes its continuation.
    private func finish(
        easy: UnsafeMutableRawPointer, with result: Result<CurlRawResponse, any Error>,
        removeFromMulti: Bool = true
    ) {
        guard let (handle, transfer) = running.removeValue(forKey: easy) else { return }
        easyByID[transfer.id] = nil
        if removeFromMulti { _ = curl_multi_remove_handle(multi, easy) }
        var connects = 0
        if ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK {
            shared.connectionsOpened.add(connects, ordering: .relaxed)
        }
        // Beyond the pool's size the handle is dropped, and its deinit calls curl_easy_cleanup.
        if idleEasyHandles.count < configuration.easyHandlePoolSize {
            idleEasyHandles.append(handle)
        }
        shared.inFlight.subtract(1, ordering: .relaxed)
        shared.completed.add(1, ordering: .relaxed)
        shared.finished(id: transfer.id)
        transfer.continuation.resume(with: result)
    }

    private func transportError(
        _ code: CURLcode, easy: CurlEasyHandle, transfer: CurlTransfer
    ) -> HTTPTransportError {
        let curlCode = Int(code.rawValue)
        if transfer.exceededLimit {
            return HTTPTransportError(
                code: .responseTooLarge, curlCode: curlCode,
                detail: "response body exceeds \(transfer.maximumResponseBytes) bytes")
        }
        let text = easy.errorText.isEmpty ? String(cString: curl_easy_strerror(code)) : easy.errorText
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

/// libcurl's socket callback (`CURLMOPT_SOCKETFUNCTION`): keeps the epoll set in step with what libcurl waits for.
private func curlSocketCallback(
    _ easy: UnsafeMutableRawPointer?, _ socket: curl_socket_t, _ what: Int32, _ context: UnsafeMutableRawPointer?,
    _ socketContext: UnsafeMutableRawPointer?
) -> Int32 {
    guard let context else { return 0 }
    Unmanaged<CurlMultiDriver>.fromOpaque(context).takeUnretainedValue().socketChanged(socket, what: what)
    return 0
}

/// libcurl's timer callback (`CURLMOPT_TIMERFUNCTION`): records when to call `CURL_SOCKET_TIMEOUT`. libcurl
/// forbids calling `curl_multi_socket_action` from here, so the loop does it.
private func curlTimerCallback(
    _ multi: UnsafeMutableRawPointer?, _ milliseconds: Int, _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let context else { return 0 }
    Unmanaged<CurlMultiDriver>.fromOpaque(context).takeUnretainedValue().timerChanged(milliseconds: milliseconds)
    return 0
}
