/// A small, bounded BER reader for the parts of CMS and receipt payloads this module needs.
///
/// swift-asn1's DER parser rejects BER, but Xcode receipts use indefinite lengths and constructed OCTET STRINGs.
/// This reader never recurses: an indefinite length is closed by an iterative scan whose nesting depth is
/// bounded, every length is checked against the bytes that remain, and any violation is an error, never a trap.
struct BERElement {
    /// The identifier octet (class, constructed bit and a low tag number). High tag numbers are rejected.
    var identifier: UInt8
    /// The whole element, header included (for an indefinite length, through its end-of-contents octets).
    var range: Range<Int>
    /// The contents, without the header or end-of-contents octets.
    var contents: Range<Int>

    var isConstructed: Bool { identifier & 0x20 != 0 }
    /// The tag with the constructed bit cleared, to compare primitive and constructed forms alike.
    var tagWithoutForm: UInt8 { identifier & ~0x20 }
}

/// The identifiers this module reads.
enum BERTag {
    static let integer: UInt8 = 0x02
    static let octetString: UInt8 = 0x04
    static let null: UInt8 = 0x05
    static let objectIdentifier: UInt8 = 0x06
    static let utf8String: UInt8 = 0x0C
    static let sequence: UInt8 = 0x30
    static let set: UInt8 = 0x31
    static let context0Constructed: UInt8 = 0xA0
    static let context1Constructed: UInt8 = 0xA1
    static let context0Primitive: UInt8 = 0x80
}

/// What went wrong while reading BER, with the offset where it went wrong.
struct BERError: Error, CustomStringConvertible {
    var reason: String
    var offset: Int
    var description: String { "\(reason) at byte \(offset)" }
}

/// Reads BER from a byte array without copying it: elements are ranges into `bytes`.
struct BERReader {
    /// The deepest nesting an indefinite length may close over; real receipts need fewer than 10.
    static let maximumDepth = 32

    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the header at `offset`: identifier, and either a definite content length or nil for indefinite.
    @inline(__always)
    private func header(
        at offset: Int, limit: Int
    ) throws(BERError) -> (identifier: UInt8, contentStart: Int, length: Int?) {
        guard offset < limit else { throw BERError(reason: "unexpected end of data", offset: offset) }
        let identifier = bytes[offset]
        guard identifier & 0x1F != 0x1F else { throw BERError(reason: "high tag number not supported", offset: offset) }
        guard offset + 1 < limit else { throw BERError(reason: "missing length", offset: offset) }
        let first = bytes[offset + 1]
        if first < 0x80 { return (identifier, offset + 2, Int(first)) }
        if first == 0x80 {
            guard identifier & 0x20 != 0 else {
                throw BERError(reason: "indefinite length on a primitive element", offset: offset)
            }
            return (identifier, offset + 2, nil)
        }
        let count = Int(first & 0x7F)
        guard count <= 4 else { throw BERError(reason: "length too large", offset: offset) }
        guard offset + 2 + count <= limit else { throw BERError(reason: "truncated length", offset: offset) }
        var length = 0
        for index in 0..<count { length = length << 8 | Int(bytes[offset + 2 + index]) }
        return (identifier, offset + 2 + count, length)
    }

    /// The element starting at `offset`, which must end at or before `limit`.
    func element(at offset: Int, limit: Int) throws(BERError) -> BERElement {
        let (identifier, contentStart, length) = try header(at: offset, limit: limit)
        if let length {
            guard length <= limit - contentStart else {
                throw BERError(reason: "length exceeds the enclosing data", offset: offset)
            }
            return BERElement(
                identifier: identifier, range: offset..<(contentStart + length),
                contents: contentStart..<(contentStart + length))
        }
        // Indefinite length: walk forward, counting open indefinite elements, until the matching end-of-contents.
        var depth = 1
        var position = contentStart
        while true {
            guard position + 1 < limit else { throw BERError(reason: "missing end-of-contents", offset: offset) }
            if bytes[position] == 0 && bytes[position + 1] == 0 {
                depth -= 1
                position += 2
                if depth == 0 {
                    return BERElement(
                        identifier: identifier, range: offset..<position, contents: contentStart..<(position - 2))
                }
                continue
            }
            let inner = try header(at: position, limit: limit)
            if let innerLength = inner.length {
                guard innerLength <= limit - inner.contentStart else {
                    throw BERError(reason: "length exceeds the enclosing data", offset: position)
                }
                position = inner.contentStart + innerLength
            } else {
                depth += 1
                guard depth <= Self.maximumDepth else { throw BERError(reason: "nesting too deep", offset: position) }
                position = inner.contentStart
            }
        }
    }

    /// The children of a constructed element, in order.
    func children(of parent: BERElement) throws(BERError) -> [BERElement] {
        guard parent.isConstructed else {
            throw BERError(reason: "expected a constructed element", offset: parent.range.lowerBound)
        }
        var result: [BERElement] = []
        var position = parent.contents.lowerBound
        while position < parent.contents.upperBound {
            let child = try element(at: position, limit: parent.contents.upperBound)
            result.append(child)
            position = child.range.upperBound
        }
        return result
    }

    /// Calls `body` for each child of a constructed element, without building an array.
    func forEachChild(of parent: BERElement, _ body: (BERElement) throws -> Void) throws {
        guard parent.isConstructed else {
            throw BERError(reason: "expected a constructed element", offset: parent.range.lowerBound)
        }
        var position = parent.contents.lowerBound
        while position < parent.contents.upperBound {
            let child = try element(at: position, limit: parent.contents.upperBound)
            try body(child)
            position = child.range.upperBound
        }
    }

    /// The first child of a constructed element, checked against an expected identifier.
    func expect(_ identifier: UInt8, in element: BERElement, what: String) throws(BERError) -> BERElement {
        guard element.identifier == identifier else {
            throw BERError(reason: "expected \(what)", offset: element.range.lowerBound)
        }
        return element
    }

    /// The value of an OCTET STRING: the contents of the primitive form, or the concatenated segments of the
    /// constructed form (Xcode receipts), read with an explicit stack bounded by `maximumDepth`.
    func octetString(_ element: BERElement) throws(BERError) -> ArraySlice<UInt8> {
        guard element.tagWithoutForm == BERTag.octetString else {
            throw BERError(reason: "expected an OCTET STRING", offset: element.range.lowerBound)
        }
        if !element.isConstructed { return bytes[element.contents] }
        var output: [UInt8] = []
        var stack: [(position: Int, end: Int)] = [(element.contents.lowerBound, element.contents.upperBound)]
        while var top = stack.popLast() {
            guard top.position < top.end else { continue }
            let segment = try self.element(at: top.position, limit: top.end)
            top.position = segment.range.upperBound
            stack.append(top)
            guard segment.tagWithoutForm == BERTag.octetString else {
                throw BERError(reason: "constructed OCTET STRING holds another type", offset: segment.range.lowerBound)
            }
            if segment.isConstructed {
                guard stack.count < Self.maximumDepth else {
                    throw BERError(reason: "nesting too deep", offset: segment.range.lowerBound)
                }
                stack.append((segment.contents.lowerBound, segment.contents.upperBound))
            } else {
                output.append(contentsOf: bytes[segment.contents])
            }
        }
        return output[...]
    }

    /// A non-negative INTEGER that fits in 63 bits, or nil.
    func integer(_ element: BERElement) -> Int64? {
        guard element.identifier == BERTag.integer, !element.contents.isEmpty, element.contents.count <= 9 else {
            return nil
        }
        let contents = bytes[element.contents]
        guard let first = contents.first, first & 0x80 == 0 else { return nil }
        if contents.count == 9 && first != 0 { return nil }
        var value: Int64 = 0
        for byte in contents { value = value << 8 | Int64(byte) }
        return value
    }
}

/// Object identifiers compared by their encoded contents (no dotted-string conversion in the hot path).
enum KnownOID {
    /// 1.2.840.113549.1.7.2 signedData
    static let signedData: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
    /// 1.2.840.113549.1.7.1 data
    static let data: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]
    /// 1.3.14.3.2.26 SHA-1
    static let sha1: [UInt8] = [0x2B, 0x0E, 0x03, 0x02, 0x1A]
    /// 2.16.840.1.101.3.4.2.1 SHA-256
    static let sha256: [UInt8] = [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]
    /// 1.2.840.113549.1.1.1 rsaEncryption
    static let rsaEncryption: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
    /// 1.2.840.113549.1.1.5 sha1WithRSAEncryption
    static let sha1WithRSA: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x05]
    /// 1.2.840.113549.1.1.11 sha256WithRSAEncryption
    static let sha256WithRSA: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B]
    /// 1.2.840.113549.1.9.4 messageDigest
    static let messageDigest: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x04]
}
