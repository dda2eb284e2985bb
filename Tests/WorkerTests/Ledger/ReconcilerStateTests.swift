import Foundation
import Testing

@testable import Ledger

/// The reconciler's lease and checkpoint against both backends (a real SQLite file and a real PostgreSQL): one
/// replica at a time, a crashed replica's lease taken over at its expiry, and a checkpoint only the holder moves,
/// only forwards, kept across holders.
@Suite("Ledger: reconciler state", .timeLimit(.minutes(2)))
struct ReconcilerStateTests {
    typealias S = LedgerTestSupport

    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func store(_ ledger: any Ledger) throws -> any ReconcilerStateStore {
        ledger
    }

    static func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }

    @Test(
        "one holder at a time; renewals by the holder; a takeover only at the expiry", arguments: LedgerBackend.allCases
    )
    func oneHolder(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            let name = "notification-history"
            let first = try await store.acquireReconcilerLease(
                name: name, holder: "a", now: Self.at(0), duration: .seconds(30))
            #expect(first == ReconcilerLease(expiresAt: Self.at(30), checkpoint: nil))
            // Just before the expiry another replica is refused; the holder renews.
            #expect(
                try await store.acquireReconcilerLease(
                    name: name, holder: "b", now: Self.at(29.999), duration: .seconds(30)) == nil)
            let renewed = try await store.acquireReconcilerLease(
                name: name, holder: "a", now: Self.at(20), duration: .seconds(30))
            #expect(renewed?.expiresAt == Self.at(50))
            #expect(
                try await store.acquireReconcilerLease(
                    name: name, holder: "b", now: Self.at(49.999), duration: .seconds(30)) == nil)
            // At the expiry (a crashed holder) the other takes it, and the first, back, is refused.
            let taken = try await store.acquireReconcilerLease(
                name: name, holder: "b", now: Self.at(50), duration: .seconds(30))
            #expect(taken == ReconcilerLease(expiresAt: Self.at(80), checkpoint: nil))
            #expect(
                try await store.acquireReconcilerLease(
                    name: name, holder: "a", now: Self.at(51), duration: .seconds(30)) == nil)
            // Another name is another lease.
            #expect(
                try await store.acquireReconcilerLease(
                    name: "other", holder: "a", now: Self.at(51), duration: .seconds(30)) != nil)
        }
    }

    @Test(
        "only the live holder moves the checkpoint, never backwards; the next holder reads it",
        arguments: LedgerBackend.allCases)
    func checkpoint(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            let name = "notification-history"
            _ = try await store.acquireReconcilerLease(name: name, holder: "a", now: Self.at(0), duration: .seconds(30))
            #expect(
                try await store.advanceReconcilerCheckpoint(
                    name: name, holder: "a", checkpoint: Self.at(-60), now: Self.at(1)))
            // Not another replica's, nor the holder's own after the expiry.
            #expect(
                try await store.advanceReconcilerCheckpoint(
                    name: name, holder: "b", checkpoint: Self.at(5), now: Self.at(2)) == false)
            #expect(
                try await store.advanceReconcilerCheckpoint(
                    name: name, holder: "a", checkpoint: Self.at(5), now: Self.at(30)) == false)
            // Renewed: an older checkpoint leaves the newer one.
            _ = try await store.acquireReconcilerLease(
                name: name, holder: "a", now: Self.at(31), duration: .seconds(30))
            #expect(
                try await store.advanceReconcilerCheckpoint(
                    name: name, holder: "a", checkpoint: Self.at(-120), now: Self.at(32)))
            // A release keeps the checkpoint and lets another replica in at once.
            try await store.releaseReconcilerLease(name: name, holder: "a", now: Self.at(33))
            let next = try await store.acquireReconcilerLease(
                name: name, holder: "b", now: Self.at(33), duration: .seconds(30))
            #expect(next == ReconcilerLease(expiresAt: Self.at(63), checkpoint: Self.at(-60)))
            // A release by a replica that does not hold it changes nothing.
            try await store.releaseReconcilerLease(name: name, holder: "a", now: Self.at(34))
            #expect(
                try await store.acquireReconcilerLease(
                    name: name, holder: "a", now: Self.at(34), duration: .seconds(30)) == nil)
        }
    }

    @Test("of many replicas asking at once, exactly one gets the lease", arguments: LedgerBackend.allCases)
    func concurrentAcquire(backend: LedgerBackend) async throws {
        try await S.withLedger(backend) { ledger, _ in
            let store = try Self.store(ledger)
            let winners = try await withThrowingTaskGroup(of: Bool.self) { group in
                for replica in 0..<8 {
                    group.addTask {
                        try await store.acquireReconcilerLease(
                            name: "race", holder: "r\(replica)", now: Self.at(0), duration: .seconds(30)) != nil
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(winners == 1)
        }
    }
}
