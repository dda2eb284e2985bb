import CZlib
import Synchronization

/// Parked receipts, deflated against a recent receipt of the same kind (zlib's raw deflate with a preset dictionary).
///
/// Receipts of one app are mostly the same bytes: the same certificate chain (about 2.5 KB in Apple's app receipts),
/// the same structure, the same bundle id and products. Against a dictionary that is another such receipt, a
/// receipt deflates to between a half and a tenth of its bytes: Apple's sandbox app receipts of the shared fixtures
/// from ~6.8 KB to ~1.5 KB, iOS 6 transaction receipts of two apps from 2.6 KB to 1.2 KB, the Apple simulator's app
/// receipts from 3.2 KB to 0.4 KB (docs/BENCHMARKS.md, "Memory per waiting job"). Only jobs that wait (for the
/// ledger or Apple) pay for it: a deflate and an inflate (the check) when first parked, an inflate each time a runner
/// takes it (parked again for Apple, it keeps what the ledger stage kept: ``Parked/parkedAgain(_:given:)``).
///
/// The dictionary of a kind (a receipt's first byte: `0x30` for a PKCS#7 app receipt, `{` for an iOS 6 transaction
/// receipt) is the first receipt of that kind deflated after the last change, and changes every
/// ``refreshEvery`` receipts, so that it follows the traffic (another app, a renewed signing certificate). A
/// deflated receipt holds its dictionary; a dictionary lives as long as a receipt deflated against it waits.
final class ReceiptDeflate: Sendable {
    /// A receipt kept deflated, with what it takes to inflate it.
    struct Deflated: Sendable {
        let bytes: [UInt8]
        let dictionary: Dictionary
        let count: Int
    }

    /// A receipt other receipts are deflated against.
    final class Dictionary: Sendable {
        let bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    /// Receipts deflated against one dictionary before the next receipt of its kind becomes the dictionary.
    let refreshEvery: Int
    private let dictionaries = Mutex<[UInt8: (dictionary: Dictionary, uses: Int)]>([:])

    init(refreshEvery: Int = 1_024) {
        self.refreshEvery = max(1, refreshEvery)
    }

    /// `receipt` deflated, if that makes it smaller and it inflates back to the same bytes; nil otherwise (the caller
    /// keeps the bytes as they are). A receipt that becomes its kind's dictionary is not deflated.
    func deflate(_ receipt: [UInt8]) -> Deflated? {
        guard let kind = receipt.first, let dictionary = dictionary(for: kind, offering: receipt) else { return nil }
        guard let bytes = deflate(receipt, dictionary: dictionary.bytes), bytes.count < receipt.count,
            inflate(bytes, dictionary: dictionary.bytes, count: receipt.count) == receipt
        else { return nil }
        return Deflated(bytes: bytes, dictionary: dictionary, count: receipt.count)
    }

    /// The receipt `deflated` holds. Checked when it was deflated; nil only if the memory holding it was damaged.
    func inflate(_ deflated: Deflated) -> [UInt8]? {
        inflate(deflated.bytes, dictionary: deflated.dictionary.bytes, count: deflated.count)
    }

    /// The dictionary for receipts of `kind`; nil when `receipt` becomes it (the first of its kind, or the first
    /// after ``refreshEvery`` uses).
    private func dictionary(for kind: UInt8, offering receipt: [UInt8]) -> Dictionary? {
        dictionaries.withLock { dictionaries in
            if let current = dictionaries[kind], current.uses < refreshEvery {
                dictionaries[kind] = (current.dictionary, current.uses + 1)
                return current.dictionary
            }
            dictionaries[kind] = (Dictionary(receipt), 0)
            return nil
        }
    }

    /// zlib's fastest level: on receipts it deflates within a few percent of the default level.
    static let level: Int32 = 1

    /// Streams kept for the next receipt: a deflate stream holds ~256 KB of buffers, an inflate stream a 32 KB
    /// window. Made anew for each receipt, those blocks would be freed between receipts and their room taken by
    /// long-lived small objects (measured: more resident memory with deflating than without). At most
    /// ``keptStreams`` of each are kept (about one per thread that parks jobs).
    private let deflaters = StreamPool(kind: .deflate)
    private let inflaters = StreamPool(kind: .inflate)

    /// `receipt` deflated against `dictionary`; nil when zlib fails or the output would not be smaller.
    func deflate(_ input: [UInt8], dictionary: [UInt8]) -> [UInt8]? {
        deflaters.with { stream in
            guard deflateReset(stream) == Z_OK else { return nil }
            let set = dictionary.withUnsafeBufferPointer {
                deflateSetDictionary(stream, $0.baseAddress, UInt32($0.count))
            }
            guard set == Z_OK else { return nil }
            // No larger than the input: a receipt that does not deflate below its size is kept as it is. Deflated
            // into scratch room, then copied to an array of its own size: kept, it must not keep the room.
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, input.count)) { out -> [UInt8]? in
                var produced = 0
                input.withUnsafeBufferPointer { source in
                    stream.pointee.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                    stream.pointee.avail_in = UInt32(source.count)
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = UInt32(input.count)
                    if CZlib.deflate(stream, Z_FINISH) == Z_STREAM_END {
                        produced = input.count - Int(stream.pointee.avail_out)
                    }
                    stream.pointee.next_in = nil
                    stream.pointee.next_out = nil
                }
                return produced > 0 ? Array(UnsafeBufferPointer(rebasing: out[0..<produced])) : nil
            }
        }
    }

    /// `input` inflated with `dictionary` into exactly `count` bytes; nil on any other result.
    func inflate(_ input: [UInt8], dictionary: [UInt8], count: Int) -> [UInt8]? {
        inflaters.with { stream in
            guard inflateReset(stream) == Z_OK else { return nil }
            // A raw stream takes its dictionary at once.
            let set = dictionary.withUnsafeBufferPointer {
                inflateSetDictionary(stream, $0.baseAddress, UInt32($0.count))
            }
            guard set == Z_OK else { return nil }
            var complete = false
            let output = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
                input.withUnsafeBufferPointer { source in
                    stream.pointee.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                    stream.pointee.avail_in = UInt32(source.count)
                    stream.pointee.next_out = out.baseAddress
                    stream.pointee.avail_out = UInt32(count)
                    complete = CZlib.inflate(stream, Z_FINISH) == Z_STREAM_END && stream.pointee.avail_out == 0
                    stream.pointee.next_in = nil
                    stream.pointee.next_out = nil
                }
                initialized = complete ? count : 0
            }
            return complete ? output : nil
        }
    }

    /// Streams of one kind kept between uses.
    static let keptStreams = 4
}

/// zlib streams of one kind, made on demand and kept for reuse (up to ``ReceiptDeflate/keptStreams``).
private final class StreamPool: @unchecked Sendable {
    enum Kind { case deflate, inflate }

    let kind: Kind
    /// A stream not in use. Unchecked Sendable: a stream is used by one thread at a time, taken out under the lock.
    private struct Idle: @unchecked Sendable {
        let stream: UnsafeMutablePointer<z_stream>
    }

    private let idle = Mutex<[Idle]>([])

    init(kind: Kind) { self.kind = kind }

    deinit {
        for kept in idle.withLock({ $0 }) { end(kept.stream) }
    }

    /// Runs `body` with a stream of its own; nil if no stream could be made.
    func with<T>(_ body: (UnsafeMutablePointer<z_stream>) -> T?) -> T? {
        guard let stream = idle.withLock({ $0.popLast()?.stream }) ?? make() else { return nil }
        let result = body(stream)
        let kept = idle.withLock { idle -> Bool in
            guard idle.count < ReceiptDeflate.keptStreams else { return false }
            idle.append(Idle(stream: stream))
            return true
        }
        if !kept { end(stream) }
        return result
    }

    private func make() -> UnsafeMutablePointer<z_stream>? {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status =
            kind == .deflate ? czlib_deflate_init_raw(stream, ReceiptDeflate.level) : czlib_inflate_init_raw(stream)
        guard status == Z_OK else {
            stream.deallocate()
            return nil
        }
        return stream
    }

    private func end(_ stream: UnsafeMutablePointer<z_stream>) {
        _ = kind == .deflate ? deflateEnd(stream) : inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }
}
