import CCurlShim
import Glibc

/// The poll thread's readiness source: an epoll set of the sockets libcurl asks to watch, plus an eventfd that
/// callers signal when they add or cancel work.
///
/// Only the poll thread registers sockets and waits; callers reach the eventfd through ``CurlWakeUp``, which the
/// engine's shared state invalidates before ``close()``.
final class CurlEventSet {
    /// Owned by this set: created in `init`, closed in ``close()``.
    private let epoll: Int32
    /// Owned by this set: created in `init`, closed in ``close()``. Non-blocking; callers write 1 to wake the loop.
    let wakeUpDescriptor: Int32
    /// Sockets in the epoll set, by descriptor, with the events registered, so that a change is one `epoll_ctl`
    /// call and an unchanged request none.
    private var registered: [Int32: Registration] = [:]

    private struct Registration {
        var events: UInt32
        /// libcurl stopped watching the socket (an idle connection back in its cache) but it stays in the epoll
        /// set, so that its next transfer needs one `epoll_ctl` instead of a DEL now and an ADD then.
        var parked: Bool
    }
    /// Owned by this set: allocated in `init`, freed in ``close()``; `epoll_wait` fills it.
    private let readyEvents: UnsafeMutablePointer<epoll_event>
    private let readyCapacity = 512
    private var isClosed = false

    init() throws(HTTPTransportError) {
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            throw HTTPTransportError(code: .other, detail: "epoll_create1 failed (errno \(errno))")
        }
        let wakeUp = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard wakeUp >= 0 else {
            let failure = errno
            Glibc.close(epoll)
            throw HTTPTransportError(code: .other, detail: "eventfd failed (errno \(failure))")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeUp
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, wakeUp, &event) == 0 else {
            let failure = errno
            Glibc.close(wakeUp)
            Glibc.close(epoll)
            throw HTTPTransportError(code: .other, detail: "epoll_ctl(eventfd) failed (errno \(failure))")
        }
        self.epoll = epoll
        self.wakeUpDescriptor = wakeUp
        self.readyEvents = .allocate(capacity: readyCapacity)
    }

    /// Watches `socket` for the given readiness (level-triggered), adding it to the set or changing its events.
    func watch(_ socket: Int32, readable: Bool, writable: Bool) {
        var event = epoll_event()
        event.events = (readable ? EPOLLIN.rawValue : 0) | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = socket
        if let current = registered[socket] {
            // libcurl reports a socket's close (REMOVE) before it closes it, so an unparked socket is the same one.
            if !current.parked && current.events == event.events { return }
            registered[socket] = Registration(events: event.events, parked: false)
            // A parked socket may have been closed and its number reused: then it is new to epoll.
            if epoll_ctl(epoll, EPOLL_CTL_MOD, socket, &event) != 0, errno == ENOENT {
                _ = epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event)
            }
        } else {
            registered[socket] = Registration(events: event.events, parked: false)
            if epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event) != 0, errno == EEXIST {
                _ = epoll_ctl(epoll, EPOLL_CTL_MOD, socket, &event)
            }
        }
    }

    /// Stops watching `socket` for libcurl (called before libcurl closes it, or when a connection goes idle).
    ///
    /// A socket registered for reading only is parked rather than removed: an idle connection reads nothing until
    /// its next transfer, and if the peer closes it meanwhile, the loop removes it on that event
    /// (``isParked(_:)``, ``remove(_:)``); a closed descriptor leaves the epoll set by itself.
    func forget(_ socket: Int32) {
        guard let current = registered[socket], !current.parked else { return }
        if current.events == EPOLLIN.rawValue {
            registered[socket]?.parked = true
        } else {
            remove(socket)
        }
    }

    /// Whether `socket` is in the set only because it was parked (libcurl does not watch it).
    func isParked(_ socket: Int32) -> Bool {
        registered[socket]?.parked ?? false
    }

    /// Takes `socket` out of the epoll set.
    func remove(_ socket: Int32) {
        guard registered.removeValue(forKey: socket) != nil else { return }
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil)
    }

    /// Waits up to `timeoutMilliseconds` (-1: no limit) and returns the ready events; valid until the next call.
    func wait(timeoutMilliseconds: Int32) -> UnsafeMutableBufferPointer<epoll_event> {
        let count = epoll_wait(epoll, readyEvents, Int32(readyCapacity), timeoutMilliseconds)
        // EINTR and other failures read as "nothing ready"; the loop simply turns again.
        return UnsafeMutableBufferPointer(start: readyEvents, count: max(Int(count), 0))
    }

    /// Empties the eventfd's counter so that it stops reading as ready.
    func drainWakeUp() {
        var value: UInt64 = 0
        _ = read(wakeUpDescriptor, &value, MemoryLayout<UInt64>.size)
    }

    /// Closes both descriptors. Called once by the poll thread after libcurl's handles are cleaned up.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(wakeUpDescriptor)
        Glibc.close(epoll)
        readyEvents.deallocate()
    }
}

/// Wakes the poll thread by writing to its eventfd. Safe from any thread (`write` on an eventfd is atomic).
struct CurlWakeUp: Sendable {
    let descriptor: Int32

    func signal() {
        var one: UInt64 = 1
        _ = write(descriptor, &one, MemoryLayout<UInt64>.size)
    }
}
