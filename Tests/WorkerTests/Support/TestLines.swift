import Foundation

/// Output of a child process, line by line.
enum TestLines {
    /// Lines read from `handle` on a thread of its own (reading blocks); a last line without a newline is kept.
    static func stream(of handle: FileHandle) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let thread = Thread {
            var pending: [UInt8] = []
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                for byte in chunk {
                    if byte == UInt8(ascii: "\n") {
                        continuation.yield(String(decoding: pending, as: UTF8.self))
                        pending = []
                    } else {
                        pending.append(byte)
                    }
                }
            }
            if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}
