// swift-tools-version:6.1
// verify-worker: a Kafka worker cluster that verifies Apple in-app purchase receipts.
// Each library target owns one part of the architecture (see README.md, "Architecture").
import PackageDescription

/// The strict settings every Swift target gets, applied in one place at the end of this file: `any` spelled out,
/// and a file sees only the members of modules it imports itself (so each target's dependencies below are exactly
/// what its sources import).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "verify-worker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "verify-worker", targets: ["VerifyWorker"]),
        .library(name: "Messages", targets: ["Messages"]),
        .library(name: "Receipts", targets: ["Receipts"]),
        .library(name: "RateLimiter", targets: ["RateLimiter"]),
        .library(name: "Kafka", targets: ["Kafka"]),
        .library(name: "Entitlements", targets: ["Entitlements"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.1.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.25.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.3.0"),
    ],
    targets: [
        // MARK: C libraries (system packages) and the curl shim
        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        // Parked receipts are kept deflated (Worker's `ReceiptDeflate`).
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),

        // MARK: Libraries, one part of the architecture each
        // One SQLite connection type and executor for the ledger and the entitlement store, and the codes their errors
        // share (the only importer of CSQLite).
        .target(
            name: "SQLiteStorage",
            dependencies: [
                "CodedErrors",
                "CSQLite",
            ]
        ),
        // The one shape of the product's errors, `CodedError`: a code, a message safe to log, the file and line where
        // it arose (no dependencies).
        .target(name: "CodedErrors"),
        // The one table of log keys and metric names every target uses (no dependencies).
        .target(name: "Observability"),
        // Racing an operation against its deadlines: the PostgreSQL operations of the ledger and the entitlement store
        // (through PostgresSettings' pool), the gateway's wait for Kafka (no dependencies).
        .target(name: "Deadlines"),
        // One reading of a `postgres://` URL (sslmode, sslrootcert, schema), one pool with its operations' deadlines and
        // one reading of PostgreSQL's errors for the ledger and the entitlement store.
        .target(
            name: "PostgresSettings",
            dependencies: [
                "Deadlines",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "Messages",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto")
            ]
        ),
        // The one place a verdict is decided: pure values and functions, no I/O (the facts stores report, their
        // judgement and evidence, the notification table, the rules, the ledger's value types). The store adapters
        // (Receipts, AppleClients) report facts to it; Ledger stores its decisions; Worker feeds it.
        .target(
            name: "Decision",
            dependencies: [
                "Messages"
            ]
        ),
        .target(
            name: "Kafka",
            dependencies: [
                "Observability",
                "CRdKafka",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "Receipts",
            dependencies: [
                "Decision",
                "Messages",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            resources: [.copy("TrustAnchors")]
        ),
        // Google Play's store adapter: reads a Play purchase locally (token shape, the signed purchase data against the
        // app's licensing key) and reports facts to Decision.
        .target(
            name: "GooglePlay",
            dependencies: [
                "Decision",
                "Messages",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The libcurl HTTP engine both stores' clients call through (the only importer of CCurl): transport, errors,
        // TLS always verified.
        .target(
            name: "StoreHTTP",
            dependencies: [
                "CCurl",
                "CCurlShim",
            ]
        ),
        .target(
            name: "AppleClients",
            dependencies: [
                "Observability",
                "StoreHTTP",
                "Decision",
                "Messages",
                "Operations",
                "Receipts",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The Google Play Developer API: the service account's OAuth tokens, the purchase reads, acknowledge and
        // consume, through the call gate.
        .target(
            name: "GooglePlayClients",
            dependencies: [
                "CodedErrors",
                "Decision",
                "Messages",
                "Observability",
                "RateLimiter",
                "StoreHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "AppleSimulator",
            dependencies: [
                "CodedErrors",
                "Operations",
                "Messages",
                "AppleClients",
                "StoreHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // A faithful Google Play (OAuth token endpoint, Android Publisher purchases, minting, faults) for tests,
        // benchmarks and the demo; the product never imports it.
        .target(
            name: "PlaySimulator",
            dependencies: [
                "CodedErrors",
                "Operations",
                "Messages",
                "StoreHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .target(
            name: "RateLimiter",
            dependencies: [
                "CodedErrors",
                "Messages",
                "Observability",
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "Ledger",
            dependencies: [
                "CodedErrors",
                "SQLiteStorage",
                "Observability",
                "Decision",
                "Messages",
                "PostgresSettings",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Recovers the App Store Server Notifications Apple failed to deliver, and builds `verify-worker reconcile`
        // (it reads the worker's configuration keys from Operations and each app's Apple clients from AppleClients,
        // not the worker).
        .target(
            name: "Reconciler",
            dependencies: [
                "Observability",
                "Kafka",
                "Messages",
                "AppleClients",
                "GooglePlay",
                "GooglePlayClients",
                "Worker",
                "StoreHTTP",
                "RateLimiter",
                "Ledger",
                "Decision",
                "Operations",
                "Receipts",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Worker",
            dependencies: [
                "CodedErrors",
                "Observability",
                "Kafka",
                "Messages",
                "Receipts",
                "GooglePlay",
                "GooglePlayClients",
                "AppleClients",
                "StoreHTTP",
                "RateLimiter",
                "Decision",
                "Ledger",
                "Operations",
                "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // The command runtime every long-running command shares: its configuration table, its services (producer,
        // operations port, background work) in one group, its JSON logs.
        .target(
            name: "Operations",
            dependencies: [
                "Observability",
                "Kafka",
                "Messages",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Gateway",
            dependencies: [
                "Deadlines",
                "Observability",
                "Kafka",
                "Messages",
                "Receipts",
                "Operations",
                "StoreHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Entitlements",
            dependencies: [
                "CodedErrors",
                "PostgresSettings",
                "SQLiteStorage",
                "Observability",
                "Kafka",
                "Messages",
                "Operations",
                "RateLimiter",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Chaos",
            dependencies: [
                "Gateway",
                "RateLimiter",
                "Observability",
                "Kafka",
                "Messages",
                "Entitlements",
                "Receipts",
                "Decision",
                "Ledger",
                "AppleSimulator",
                "AppleClients",
                "StoreHTTP",
                "Operations",
                "Reconciler",
                "Traffic",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // MARK: The harness: traffic, load, benchmarks and the demo (they may depend on the product, never the reverse)
        // Traffic generation, load generators, the child-process type and process measurements: the lowest harness
        // target, which the benchmarks, the demo and the chaos harness share.
        .target(
            name: "Traffic",
            dependencies: [
                "CodedErrors",
                "AppleClients",
                "StoreHTTP",
                "AppleSimulator",
                "Kafka",
                "Messages",
                "Operations",
                "RateLimiter",
                "Receipts",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The demo: a cluster of workers against the simulator, with its verdict table.
        .target(
            name: "Demo",
            dependencies: [
                "AppleClients",
                "StoreHTTP",
                "AppleSimulator",
                "PlaySimulator",
                "Entitlements",
                "Gateway",
                "Kafka",
                "Messages",
                "Observability",
                "Operations",
                "Worker",
                "RateLimiter",
                "Receipts",
                "Traffic",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "Benchmarks",
            dependencies: [
                "Decision",
                "AppleClients",
                "StoreHTTP",
                "AppleSimulator",
                "Demo",
                "Entitlements",
                "Gateway",
                "Kafka",
                "Ledger",
                "GooglePlayClients",
                "Reconciler",
                "Messages",
                "Observability",
                "Operations",
                "PlaySimulator",
                "Worker",
                "RateLimiter",
                "Receipts",
                "Traffic",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // MARK: The command (thin)
        .executableTarget(
            name: "VerifyWorker",
            dependencies: [
                "CodedErrors",
                "Observability",
                "Decision",
                "Kafka",
                "Messages",
                "Receipts",
                "AppleClients",
                "StoreHTTP",
                "AppleSimulator",
                "PlaySimulator",
                "Ledger",
                "Worker",
                "Operations",
                "Gateway",
                "Entitlements",
                "Reconciler",
                "Chaos",
                "Traffic",
                "Benchmarks",
                "Demo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // MARK: Tests
        .testTarget(
            name: "WorkerTests",
            dependencies: [
                "CodedErrors",
                "GooglePlayClients",
                "Deadlines",
                "SQLiteStorage",
                "Observability",
                "Kafka",
                "Messages",
                "Receipts",
                "AppleClients",
                "StoreHTTP",
                "AppleSimulator",
                "PlaySimulator",
                "GooglePlay",
                "RateLimiter",
                "Decision",
                "Ledger",
                "Reconciler",
                "Worker",
                "Operations",
                "Gateway",
                "Entitlements",
                "Chaos",
                "Traffic",
                "Benchmarks",
                "Demo",
                "PostgresSettings",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                "CCurlShim",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ]
)

// The strict settings, once, for every Swift target (the C libraries and the C shim take none).
for target in package.targets where target.type != .system && target.name != "CCurlShim" {
    target.swiftSettings = (target.swiftSettings ?? []) + strictSettings
}
