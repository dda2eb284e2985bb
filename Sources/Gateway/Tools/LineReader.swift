import Dispatch
import Foundation

/// Reads text lines from a file or standard input on a thread of its own (reading blocks) and hands them to
/// async code, at most `bufferedLines` ahead of the reader, so memory stays bounded however large the input.
public enum LineReader {
    /// One input line and its number (from 1).
    public struct Line: Sendable {
        public var number: Int
        public var text: String
    }

    /// The lines of `path` (`-` or nil: standard input). Throws at once if the file cannot be opened.
    public static func lines(of path: String?, bufferedLines: Int = 1024) throws -> Lines {
        let file: UnsafeMutablePointer<FILE>
        if let path, path != "-" {
            // Ownership: fopen gives us the FILE; the reader thread closes it at end of input.
            guard let opened = fopen(path, "r") else {
                throw LineReaderError(path: path, reason: String(cString: strerror(errno)))
            }
            file = opened
        } else {
            guard let input = fdopen(STDIN_FILENO, "r") else {
                throw LineReaderError(path: "standard input", reason: String(cString: strerror(errno)))
            }
            file = input
        }
        let handle = FileHandleBox(file: file, closeAtEnd: path != nil && path != "-")
        let slots = DispatchSemaphore(value: max(1, bufferedLines))
        let (stream, continuation) = AsyncStream<Line>.makeStream(bufferingPolicy: .unbounded)
        let thread = Thread {
            var number = 0
            var buffer: UnsafeMutablePointer<CChar>?
            var capacity = 0
            // Ownership: getline (re)allocates `buffer`; freed once here at the end.
            defer { free(buffer) }
            while true {
                let length = getline(&buffer, &capacity, handle.file)
                guard length >= 0, let buffer else { break }
                number += 1
                var bytes = UnsafeRawBufferPointer(start: buffer, count: length)
                while let last = bytes.last, last == 0x0A || last == 0x0D {
                    bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast())
                }
                let text = String(decoding: bytes, as: UTF8.self)
                slots.wait()
                if case .terminated = continuation.yield(Line(number: number, text: text)) { break }
            }
            handle.closeIfOwned()
            continuation.finish()
        }
        thread.name = "line-reader"
        thread.start()
        return Lines(stream: stream, slots: slots)
    }

    /// The lines, in order; each one taken frees a place for the reader thread.
    public struct Lines: AsyncSequence, Sendable {
        let stream: AsyncStream<Line>
        let slots: DispatchSemaphore

        public struct AsyncIterator: AsyncIteratorProtocol {
            var base: AsyncStream<Line>.AsyncIterator
            let slots: DispatchSemaphore

            public mutating func next() async -> Line? {
                let line = await base.next()
                if line != nil { slots.signal() }
                return line
            }
        }

        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(base: stream.makeAsyncIterator(), slots: slots)
        }
    }
}

/// A file that cannot be read, with the system's reason.
public struct LineReaderError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "cannot read \(path): \(reason)" }
}

/// The `FILE` the reader thread reads.
///
/// `@unchecked Sendable`: only the reader thread touches the `FILE` after creation.
private final class FileHandleBox: @unchecked Sendable {
    let file: UnsafeMutablePointer<FILE>
    let closeAtEnd: Bool
    init(file: UnsafeMutablePointer<FILE>, closeAtEnd: Bool) {
        self.file = file
        self.closeAtEnd = closeAtEnd
    }
    func closeIfOwned() {
        if closeAtEnd { fclose(file) }
    }
}
