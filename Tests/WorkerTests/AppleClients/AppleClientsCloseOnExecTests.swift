import CCurlShim
import Glibc
import Testing

@testable import AppleClients
@testable import StoreHTTP

@Suite("Apple clients: curl sockets are close-on-exec")
struct AppleClientsCloseOnExecTests {
    @Test("The socket option callback marks a socket close-on-exec")
    func sockoptCallback() {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(socket >= 0)
        defer { close(socket) }
        #expect(fcntl(socket, F_GETFD) & FD_CLOEXEC == 0)
        #expect(ccurl_sockopt_close_on_exec(nil, socket, CURLSOCKTYPE_IPCXN) == CURL_SOCKOPT_OK)
        #expect(fcntl(socket, F_GETFD) & FD_CLOEXEC != 0)
    }

    @Test("Easy handles are made with it set")
    func easyHandlesSetIt() throws {
        let made = CurlEasyHandle.make(configuration: HTTPEngineConfiguration())
        #expect(throws: Never.self) { try made.get() }
    }
}
