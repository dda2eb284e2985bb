import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP port on 127.0.0.1 that nobody listens on now (the kernel's pick for port 0), for a child process's
/// operations port when the parent must know it before the child starts (bench, demo and tests).
///
/// The port is free when this returns; another process may take it before the child binds it, so callers that
/// start children treat a failed bind like any other failed start.
public enum FreeLocalPort {
    public static func pick() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw FreeLocalPortError("socket() failed: errno \(errno)") }
        defer { close(descriptor) }
        guard let port = bindLoopback(descriptor) else {
            throw FreeLocalPortError("bind() to a free port failed: errno \(errno)")
        }
        return port
    }

    /// Binds `descriptor`, an IPv4 stream socket, to 127.0.0.1 on a port the kernel picks, and returns that port;
    /// nil, with `errno` set, when the bind or reading the port back failed.
    public static func bindLoopback(_ descriptor: Int32) -> Int? {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}

/// No free port could be picked.
public struct FreeLocalPortError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
