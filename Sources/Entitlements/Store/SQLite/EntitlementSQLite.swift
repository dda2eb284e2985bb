import CodedErrors
import SQLiteStorage

/// The entitlement store's SQLite connection (the ledger's connection type with its own pragmas and errors).
typealias EntitlementSQLiteConnection = SQLiteConnection<EntitlementStoreError>

extension EntitlementSQLiteConnection {
    static let setup = [
        // Before WAL: a new file takes its page size at its first write. 16 KiB pages quarter the WAL's write calls.
        "PRAGMA page_size=16384",
        "PRAGMA journal_mode=WAL",
        // FULL: a batch's offsets are committed to Kafka once its transaction returns, so that transaction must
        // survive a power loss too, not only a crash of the process (NORMAL's guarantee in WAL mode).
        "PRAGMA synchronous=FULL",
        "PRAGMA foreign_keys=ON",
        // The projection reads back what it wrote moments ago: a 64 MiB page cache and memory-mapped reads replaced
        // most of its pread calls (`bench entitlements`, perf). No automatic checkpoint: it would run inside a
        // batch's commit and hold it for as long as copying the WAL takes (the store checkpoints on a connection of
        // its own, see `SQLiteEntitlementStore.run`).
        "PRAGMA cache_size=-65536",
        "PRAGMA mmap_size=268435456",
        "PRAGMA wal_autocheckpoint=0",
    ]
}
