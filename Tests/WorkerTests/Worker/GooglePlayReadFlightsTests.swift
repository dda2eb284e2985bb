import Synchronization
import Testing

@testable import Worker

/// Jobs asking about one Google Play purchase at once share one read; a cancelled job stops waiting at once.
@Suite("Google Play: one read per purchase at a time", .timeLimit(.minutes(2)))
struct GooglePlayReadFlightsTests {
    /// A read that waits until released, counting how often it started and whether it saw its cancellation.
    final class HeldRead: Sendable {
        let started = Atomic(0)
        let sawCancellation = Atomic(false)
        private let release: AsyncStream<Void>
        private let releaser: AsyncStream<Void>.Continuation

        init() { (release, releaser) = AsyncStream.makeStream() }

        func read() async -> Int {
            started.add(1, ordering: .relaxed)
            for await _ in release { break }
            if Task.isCancelled { sawCancellation.store(true, ordering: .relaxed) }
            return 42
        }

        func open() { releaser.finish() }
    }

    static func waitUntil(_ condition: () -> Bool) async {
        while !condition() { await Task.yield() }
    }

    @Test("ten jobs asking at once: one read, one value for all; another key reads on its own")
    func shared() async throws {
        let flights = GooglePlayReadFlights<Int>()
        let held = HeldRead()
        let jobs = (0..<10).map { _ in Task { try await flights.value(for: "token-a") { await held.read() } } }
        await Self.waitUntil { held.started.load(ordering: .relaxed) == 1 }
        let other = Task { try await flights.value(for: "token-b") { 7 } }
        #expect(try await other.value == 7)
        held.open()
        for job in jobs { #expect(try await job.value == 42) }
        let reads = held.started.load(ordering: .relaxed)
        #expect(reads == 1)
        #expect(flights.count == 0)
    }

    @Test("a cancelled job stops waiting at once, the read goes on for the others; with nobody left it is cancelled")
    func cancellation() async throws {
        let flights = GooglePlayReadFlights<Int>()
        let held = HeldRead()
        let first = Task { try await flights.value(for: "token") { await held.read() } }
        await Self.waitUntil { held.started.load(ordering: .relaxed) == 1 }
        let second = Task { try await flights.value(for: "token") { await held.read() } }
        await Self.waitUntil { flights.waiting(for: "token") == 2 }
        first.cancel()
        await #expect(throws: CancellationError.self) { _ = try await first.value }
        held.open()
        #expect(try await second.value == 42)
        let cancelled = held.sawCancellation.load(ordering: .relaxed)
        #expect(!cancelled, "the read was not cancelled while a job waited")

        let alone = HeldRead()
        let only = Task { try await flights.value(for: "token-2") { await alone.read() } }
        await Self.waitUntil { alone.started.load(ordering: .relaxed) == 1 }
        only.cancel()
        await #expect(throws: CancellationError.self) { _ = try await only.value }
        await Self.waitUntil { flights.count == 0 }
        alone.open()
    }
}
