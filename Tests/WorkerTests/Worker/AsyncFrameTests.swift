import Foundation
import Testing

@testable import Worker

/// The async frames a waiting job's task keeps (``AsyncFrames``, the rule written once): every async function a
/// runner of the store stage, a follower of a single flight or a job held by a configuration fault is suspended in
/// keeps a frame of at most ``AsyncFrames/maximumFrameBytes`` in a debug build, and the whole chain at most
/// ``AsyncFrames/maximumChainBytes``. The sizes are read from this test binary: each async function has an "async
/// function pointer" (a symbol whose mangled name ends in `Tu`) holding the size of its context, its frame.
@Suite("Pipeline: the async frames of a waiting job", .timeLimit(.minutes(2)))
struct AsyncFrameTests {
    @Test("each function of the waiting chain keeps a frame within the rule, and the chain as a whole too")
    func framesWithinTheRule() throws {
        let sizes = try AsyncFunctionFrames(binary: "/proc/self/exe")
        var total = 0
        for function in AsyncFrames.waitingChain {
            let matches = sizes.frames.filter { function.matches($0.key) }
            #expect(matches.count == 1, "\(function.name): \(matches.count) async functions match")
            guard let bytes = matches.first?.value else { continue }
            #expect(bytes <= AsyncFrames.maximumFrameBytes, "\(function.name) keeps \(bytes) bytes")
            total += bytes
        }
        #expect(total <= AsyncFrames.maximumChainBytes, "the waiting chain keeps \(total) bytes")
    }

    @Test("the reader finds a function's frame, and a frame grown past the rule fails it")
    func readerSeesGrowth() throws {
        let sizes = try AsyncFunctionFrames(binary: "/proc/self/exe")
        let small = try #require(sizes.frames.first { $0.key.contains("19AsyncFrameTestProbeV5small") }?.value)
        let large = try #require(sizes.frames.first { $0.key.contains("19AsyncFrameTestProbeV5large") }?.value)
        #expect(small <= AsyncFrames.maximumFrameBytes)
        #expect(large > AsyncFrames.maximumFrameBytes, "a function holding a large value across an await")
        #expect(large > small + 4_096)
    }
}

/// Two async functions whose frames differ by a large value held across an await: the reader must tell them apart.
struct AsyncFrameTestProbe {
    func small() async -> Int {
        await Task.yield()
        return 1
    }

    func large() async -> Int {
        let block = (
            InlineArray<1024, UInt64>(repeating: 1), InlineArray<1024, UInt64>(repeating: 2)
        )
        await Task.yield()
        return Int(block.0[3] &+ block.1[1000])
    }
}

/// The frame sizes of this binary's async functions, by mangled name, read from its ELF symbol table.
struct AsyncFunctionFrames {
    struct NotELF: Error {}

    /// Context bytes by the mangled name of the async function pointer (`…Tu`).
    var frames: [String: Int] = [:]

    init(binary path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        frames = try data.withUnsafeBytes { raw -> [String: Int] in
            func read<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> Int {
                Int(T(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self)))
            }
            guard raw.count > 64, raw[0] == 0x7F, raw[1] == 0x45, raw[2] == 0x4C, raw[3] == 0x46, raw[4] == 2 else {
                throw NotELF()
            }
            struct Section {
                var type: Int
                var address: Int
                var offset: Int
                var size: Int
                var link: Int
                var entrySize: Int
            }
            let sectionsAt = read(0x28, UInt64.self)
            let sectionSize = read(0x3A, UInt16.self)
            let sections = (0..<read(0x3C, UInt16.self)).map { index -> Section in
                let base = sectionsAt + index * sectionSize
                return Section(
                    type: read(base + 4, UInt32.self), address: read(base + 0x10, UInt64.self),
                    offset: read(base + 0x18, UInt64.self), size: read(base + 0x20, UInt64.self),
                    link: read(base + 0x28, UInt32.self), entrySize: read(base + 0x38, UInt64.self))
            }
            var frames: [String: Int] = [:]
            for table in sections where table.type == 2 && table.entrySize == 24 {
                let names = sections[table.link]
                for entry in stride(from: table.offset, to: table.offset + table.size, by: 24) {
                    let nameAt = names.offset + read(entry, UInt32.self)
                    // `$s` … `Tu`: the async function pointers of Swift functions.
                    guard raw[nameAt] == 0x24, raw[nameAt + 1] == 0x73 else { continue }
                    var end = nameAt
                    while raw[end] != 0 { end += 1 }
                    guard raw[end - 2] == 0x54, raw[end - 1] == 0x75 else { continue }
                    let sectionIndex = read(entry + 6, UInt16.self)
                    guard sectionIndex > 0, sectionIndex < sections.count else { continue }
                    let section = sections[sectionIndex]
                    let address = read(entry + 8, UInt64.self)
                    // Only pointers stored in the file (not in a section of zeroes).
                    guard section.type != 8, address >= section.address, address + 8 <= section.address + section.size
                    else { continue }
                    let name = String(decoding: UnsafeRawBufferPointer(rebasing: raw[nameAt..<end]), as: UTF8.self)
                    frames[name] = read(section.offset + address - section.address + 4, UInt32.self)
                }
            }
            return frames
        }
    }
}

extension AsyncFrames {
    /// An async function, by the fragments of its mangled name.
    struct Function: Sendable {
        var name: String
        var fragments: [String]

        /// Whether `mangled` is this function's async function pointer (not a closure's, a thunk's or a witness's).
        func matches(_ mangled: String) -> Bool {
            fragments.allSatisfy { mangled.contains($0) } && !mangled.contains("fU") && !mangled.hasSuffix("TATu")
                && !mangled.hasSuffix("TWTu")
        }
    }

    /// Where a waiting job's task may be suspended: a store stage runner's step down to the call gate, a follower of
    /// a single flight, a job held by a configuration fault.
    static let waitingChain: [Function] = [
        Function(name: "WorkerLoop.step", fragments: ["0A4LoopC4step"]),
        Function(name: "WorkerLoop.advanced", fragments: ["0A4LoopC8advanced"]),
        Function(name: "JobProcessor.advance", fragments: ["12JobProcessorV7advance"]),
        Function(name: "JobProcessor.askStore", fragments: ["12JobProcessorV8askStore"]),
        Function(name: "AppStore.verify", fragments: ["8AppStoreV6verify"]),
        Function(name: "AppStore.ask", fragments: ["8AppStoreV3ask_"]),
        Function(name: "AppStore.waitForTurn", fragments: ["8AppStoreV11waitForTurn"]),
        Function(name: "AppleCallCoalescer.evidence", fragments: ["18AppleCallCoalescerC8evidence"]),
        Function(name: "AppleCallCoalescer.lead", fragments: ["18AppleCallCoalescerC4lead"]),
        Function(name: "AppleSingleFlight.run", fragments: ["17AppleSingleFlightC3run_"]),
        Function(name: "AppleSingleFlight.follow", fragments: ["17AppleSingleFlightC6follow"]),
        Function(name: "AppStore.callApple", fragments: ["8AppStoreV9callApple"]),
        Function(name: "AppStore.askVerifyReceipt", fragments: ["8AppStoreV16askVerifyReceipt"]),
        Function(name: "AppleCaller.call", fragments: ["11AppleCallerV4call_"]),
    ]
}
