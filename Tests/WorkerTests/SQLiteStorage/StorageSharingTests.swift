import CodedErrors
import Entitlements
import Foundation
import Ledger
import SQLiteStorage
import Testing

/// The ledger and the entitlement store share one SQLite executor and one error shape.
@Suite("SQLite storage: one executor and one error shape for both stores", .timeLimit(.minutes(2)))
struct StorageSharingTests {
    static func temporaryPath() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("verify-storage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent("store.sqlite").path
    }

    @Test("both errors: the description's form, equality on code and detail, one retry classification per code")
    func errorShape() {
        let ledger = LedgerError(.refused, "a constraint", file: "A.swift", line: 1)
        #expect(ledger.description == "ledger refused: a constraint (A.swift:1)")
        #expect(ledger == LedgerError(.refused, "a constraint", file: "B.swift", line: 2))
        #expect(!ledger.isRetryable, "a refusal of the values fails again")
        let store = EntitlementStoreError(.busy, "locked", file: "C.swift", line: 3)
        #expect(store.description == "entitlement store busy: locked (C.swift:3)")
        #expect(store.isRetryable)
        // SQLite's failures map by kind onto each store's codes; the projection retries a refusal.
        #expect(LedgerError(sqlite: .refused, "x", file: "", line: 0).code == .refused)
        #expect(EntitlementStoreError(sqlite: .refused, "x", file: "", line: 0).isRetryable)
        for code in LedgerError.Code.allCases {
            #expect(LedgerError(code, "").isRetryable == code.isRetryable)
        }
        for code in EntitlementStoreError.Code.allCases {
            #expect(EntitlementStoreError(code, "").isRetryable == code.isRetryable)
        }
    }

    @Test("the executor runs statements on its queue and throws an injected fault as the store's error")
    func executorFault() async throws {
        let path = try Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let executor = try SQLiteExecutor<EntitlementStoreError>(
            path: path, busyTimeout: .seconds(1), setup: ["PRAGMA journal_mode=WAL"], label: "test.storage")
        let one = try await executor.run { connection in try connection.query("SELECT 1") }
        #expect(one.first?.first?.integer == 1)
        await executor.setFaultHook { label in label == "write" ? EntitlementStoreError(.database, "injected") : nil }
        await #expect(throws: EntitlementStoreError(.database, "injected")) {
            try await executor.run { _, fault in try fault("write") }
        }
        try await executor.run { _, fault in try fault("other") }
        await executor.close()
    }
}
