import CCurl
import CCurlShim

/// One request in flight: its continuation and the response being collected.
///
/// Created by the caller, then owned by the poll thread from hand-off until it resumes the continuation.
final class CurlTransfer {
    let id: UInt64
    let request: TransportRequest
    /// Resumed exactly once: by the poll thread when the transfer ends (``CurlMultiDriver`` removes the transfer
    /// from its table first), or by the caller when the submission was refused.
    let continuation: UnsafeContinuation<CurlRawResponse, any Error>
    let maximumResponseBytes: Int
    var body: [UInt8] = []
    /// Raw header lines of the current response, as received.
    var headerBytes: [UInt8] = []
    var exceededLimit = false
    /// The `Content-Length` of the current response, when it sent one; sizes the body buffer.
    var announcedLength: Int?

    init(
        id: UInt64, request: TransportRequest, continuation: UnsafeContinuation<CurlRawResponse, any Error>,
        maximumResponseBytes: Int
    ) {
        self.id = id
        self.request = request
        self.continuation = continuation
        self.maximumResponseBytes = maximumResponseBytes
    }
}

/// One libcurl easy handle and its error buffer, reused across transfers.
///
/// The options that never change (TLS verification, protocols, callbacks, connect timeout) are set once when the
/// handle is made; each transfer sets only its own (URL, method, body, headers, time limit, callback context).
/// Reusing a handle this way, instead of `curl_easy_reset` and all options again, also keeps its DNS and TLS
/// session caches.
final class CurlEasyHandle {
    /// Owned by this object: made by `curl_easy_init` in ``make(configuration:)``, freed in `deinit`.
    let pointer: UnsafeMutableRawPointer
    /// Owned by this object; libcurl writes its error text into it (registered with `CURLOPT_ERRORBUFFER`).
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// Owned by this object: the request header list of the last transfer, built by `curl_slist_append` and freed
    /// with `curl_slist_free_all` when a transfer needs other headers, or in `deinit` after `curl_easy_cleanup`.
    /// A transfer uses it until `curl_multi_remove_handle`, before the handle's next transfer is prepared.
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// What `headerList` was built from. The Apple clients send the same headers on every call, so the list is
    /// built once per handle instead of a few `malloc`s per request.
    private var headerListSource: (headers: [(name: String, value: String)], isPost: Bool)?

    private init(pointer: UnsafeMutableRawPointer) {
        self.pointer = pointer
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_easy_cleanup(pointer)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    var errorText: String { String(cString: errorBuffer) }

    /// A new handle with the engine-wide options set.
    static func make(configuration: HTTPEngineConfiguration) -> Result<CurlEasyHandle, HTTPTransportError> {
        guard let pointer = curl_easy_init() else {
            return .failure(HTTPTransportError(code: .other, detail: "curl_easy_init failed"))
        }
        let handle = CurlEasyHandle(pointer: pointer)
        var results: [CURLcode] = []
        func set(_ option: CURLoption, _ value: Int) {
            results.append(ccurl_easy_setopt_long(pointer, option, value))
        }
        func set(_ option: CURLoption, _ value: String) {
            results.append(ccurl_easy_setopt_string(pointer, option, value))
        }
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
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_TCP_KEEPALIVE, 1)
        set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.roundedUpMilliseconds)
        set(CURLOPT_USERAGENT, configuration.userAgent)
        results.append(ccurl_easy_setopt_pointer(pointer, CURLOPT_ERRORBUFFER, handle.errorBuffer))
        results.append(ccurl_easy_setopt_write_callback(pointer, curlWriteCallback))
        results.append(ccurl_easy_setopt_header_callback(pointer, curlHeaderCallback))
        // Sockets close-on-exec: a child process must not keep a connection (or its epoll registration) alive.
        results.append(ccurl_easy_setopt_close_on_exec(pointer))
        if let failed = results.first(where: { $0 != CURLE_OK }) {
            return .failure(
                HTTPTransportError(
                    code: .invalidRequest, curlCode: Int(failed.rawValue),
                    detail: String(cString: curl_easy_strerror(failed))))
        }
        return .success(handle)
    }

    /// Sets the options of one transfer. Returns the error of the first option libcurl refuses.
    func prepare(for transfer: CurlTransfer, defaultTimeout: Duration) -> HTTPTransportError? {
        let request = transfer.request
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        errorBuffer[0] = 0
        var failed = CURLE_OK
        func check(_ result: CURLcode) {
            if failed == CURLE_OK { failed = result }
        }

        check(ccurl_easy_setopt_string(pointer, CURLOPT_URL, request.url))
        // Over TLS, wait for an HTTP/2 connection being set up rather than opening a parallel one.
        check(ccurl_easy_setopt_long(pointer, CURLOPT_PIPEWAIT, Self.isHTTPS(request.url) ? 1 : 0))
        check(
            ccurl_easy_setopt_long(
                pointer, CURLOPT_TIMEOUT_MS, (request.timeout ?? defaultTimeout).roundedUpMilliseconds))
        check(ccurl_easy_setopt_pointer(pointer, CURLOPT_WRITEDATA, context))
        check(ccurl_easy_setopt_pointer(pointer, CURLOPT_HEADERDATA, context))

        // Handles are reused: clear the custom method a previous PUT left behind.
        check(ccurl_easy_setopt_pointer(pointer, CURLOPT_CUSTOMREQUEST, nil))
        switch request.method {
        case .get:
            check(ccurl_easy_setopt_long(pointer, CURLOPT_HTTPGET, 1))
        case .post, .put:
            let body = request.body ?? []
            check(ccurl_easy_setopt_long(pointer, CURLOPT_POST, 1))
            check(ccurl_easy_setopt_long(pointer, CURLOPT_POSTFIELDSIZE, body.count))
            // COPYPOSTFIELDS copies the body, so the Swift array need not outlive this call.
            let copied = body.withUnsafeBytes { bytes -> CURLcode in
                let address = bytes.baseAddress ?? UnsafeRawPointer(("" as StaticString).utf8Start)
                return ccurl_easy_setopt_pointer(
                    pointer, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: address))
            }
            check(copied)
            // A body sent like a POST's, under PUT's name (CURLOPT_UPLOAD would need a read callback).
            if request.method == .put { check(ccurl_easy_setopt_string(pointer, CURLOPT_CUSTOMREQUEST, "PUT")) }
        }
        // Always set, so that a reused handle never keeps a list that was freed.
        check(
            ccurl_easy_setopt_slist(
                pointer, CURLOPT_HTTPHEADER, headers(request.headers, isPost: request.method != .get)))

        guard failed == CURLE_OK else {
            return HTTPTransportError(
                code: .invalidRequest, curlCode: Int(failed.rawValue),
                detail: String(cString: curl_easy_strerror(failed)))
        }
        return nil
    }

    /// The header list for `headers`: the one already built when the previous transfer sent the same headers.
    private func headers(
        _ headers: [(name: String, value: String)], isPost: Bool
    ) -> UnsafeMutablePointer<curl_slist>? {
        if let source = headerListSource, source.isPost == isPost, source.headers.count == headers.count,
            zip(source.headers, headers).allSatisfy({ $0.name == $1.name && $0.value == $1.value })
        {
            return headerList
        }
        if let headerList { curl_slist_free_all(headerList) }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for header in headers {
            list = curl_slist_append(list, header.name + ": " + header.value)
        }
        // No `Expect: 100-continue` round trip before a body.
        if isPost { list = curl_slist_append(list, "Expect:") }
        headerList = list
        headerListSource = (headers, isPost)
        return list
    }

    private static func isHTTPS(_ url: String) -> Bool {
        var scheme = url.utf8.prefix(6).makeIterator()
        for expected in "https:".utf8 {
            guard let byte = scheme.next(), byte | 0x20 == expected | 0x20 else { return false }
        }
        return true
    }
}

/// libcurl's write callback: appends body bytes, or aborts the transfer (by returning 0) past the size limit.
private func curlWriteCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard transfer.body.count + length <= transfer.maximumResponseBytes else {
        transfer.exceededLimit = true
        return 0
    }
    if let data, length > 0 {
        if transfer.body.isEmpty {
            // One allocation for the whole body when its length was announced (and within the limit).
            let announced = min(transfer.announcedLength ?? 0, transfer.maximumResponseBytes)
            transfer.body.reserveCapacity(max(length, announced))
        }
        transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
    }
    return length
}

/// libcurl's header callback: keeps the raw line. A status line starts a new response (after a `100 Continue`),
/// so the lines collected so far are dropped.
private func curlHeaderCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let context, let data else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let line = UnsafeRawBufferPointer(start: data, count: length)
    if line.starts(with: "HTTP/".utf8) {
        transfer.headerBytes.removeAll(keepingCapacity: true)
        transfer.headerBytes.reserveCapacity(512)
        transfer.announcedLength = nil
    } else if let length = curlContentLength(line) {
        transfer.announcedLength = length
    }
    guard transfer.headerBytes.count + length <= 64 * 1024 else { return 0 }
    transfer.headerBytes.append(contentsOf: line)
    return length
}

/// The value of a `Content-Length` header line, if `line` is one with a plain decimal value.
func curlContentLength(_ line: UnsafeRawBufferPointer) -> Int? {
    let name = "content-length:".utf8
    guard line.count > name.count, line.count < name.count + 24 else { return nil }
    for (byte, expected) in zip(line, name) where byte | 0x20 != expected | 0x20 {
        return nil
    }
    var value = 0
    var digits = 0
    for byte in line.dropFirst(name.count) {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"):
            digits += 1
            guard digits <= 18 else { return nil }  // no overflow on hostile input
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        case 0x20, 0x09, 0x0D, 0x0A:
            continue
        default:
            return nil
        }
    }
    return digits > 0 ? value : nil
}

/// What the poll thread hands back: the status, the raw header block and the body.
struct CurlRawResponse: Sendable {
    var status: Int
    var headerBytes: [UInt8]
    var body: [UInt8]

    func parsedHeaders() -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        for line in headerBytes.split(separator: UInt8(ascii: "\n")) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }  // status or blank line
            headers.append(
                (
                    String(decoding: Self.trimmed(line[..<colon]), as: UTF8.self),
                    String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self)
                ))
        }
        return headers
    }

    /// Drops spaces, tabs and line ends at both ends (header lines are ASCII framing around opaque bytes).
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var slice = bytes
        while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
        while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
        return slice
    }
}
