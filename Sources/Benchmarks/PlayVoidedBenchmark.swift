import Decision
import Foundation
import GooglePlayClients
import Ledger
import Logging
import Messages
import RateLimiter
import Reconciler
import StoreHTTP
import Synchronization
import _CryptoExtras

/// `verify-worker bench reconcile-play`: one voided-purchases sweep of `verify-worker reconcile` over `voided` voided
/// purchases, through the real Developer API client (its gate, access-token cache and query building) against an
/// in-process stub of Google's token endpoint and `purchases.voidedpurchases.list`, a real SQLite ledger (lease,
/// checkpoint, each token's product type) and a counting sink in place of Kafka. Reports the calls Google saw
/// against the pages (the target: no more calls than pages) and the busiest wall-clock minute against the quota share.
public enum PlayVoidedBenchmark {
    public struct Result: Sendable, Codable {
        public var voided: Int
        public var pageSize: Int
        public var pages: Int
        /// `voidedpurchases.list` calls the stub answered (its own count).
        public var calls: Int
        /// Token-endpoint exchanges (outside the quota).
        public var tokenExchanges: Int
        public var jobs: Int
        /// The share's calls per wall-clock minute.
        public var budgetCallsPerMinute: Int
        /// The most calls the stub saw in one wall-clock minute.
        public var busiestMinuteCalls: Int
        public var callsWithinPages: Bool
        public var quotaShareHeld: Bool
        public var seconds: Double
        public var result: String
    }

    /// Google, as far as the sweep talks to it: the token endpoint and one package's voided purchases, `pageSize` a
    /// page by token. Counts what it answers.
    final class StubGoogle: HTTPTransport, Sendable {
        let records: [String]
        let pageSize: Int
        let calls = Mutex<[Int64]>([])
        let tokens = Atomic(0)

        init(voided: Int, pageSize: Int) {
            self.pageSize = pageSize
            records = (0..<voided).map { index in
                let order = String(format: "GPA.3%03d-%04d-%04d-%05d", index % 1000, index / 1000, 7, index)
                return #"{"kind":"androidpublisher#voidedPurchase","purchaseToken":"bench-token-\#(index)","#
                    + #""orderId":"\#(order)","purchaseTimeMillis":"1766000000000","#
                    + #""voidedTimeMillis":"\#(1_767_000_000_000 + Int64(index))","voidedSource":0,"voidedReason":1}"#
            }
        }

        func execute(_ request: TransportRequest) async throws -> TransportResponse {
            if request.url.hasSuffix("/token") {
                tokens.add(1, ordering: .relaxed)
                return Self.json(#"{"access_token":"bench-access","expires_in":3600,"token_type":"Bearer"}"#)
            }
            calls.withLock { $0.append(Int64((Date().timeIntervalSince1970 * 1000).rounded())) }
            let query = URLComponents(string: request.url)?.queryItems ?? []
            let offset = Int(query.first { $0.name == "token" }?.value ?? "0") ?? 0
            let end = min(offset + pageSize, records.count)
            var body = #"{"voidedPurchases":["# + records[min(offset, end)..<end].joined(separator: ",") + "]"
            if end < records.count { body += #","tokenPagination":{"nextPageToken":"\#(end)"}"# }
            return Self.json(body + "}")
        }

        static func json(_ text: String) -> TransportResponse {
            TransportResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(text.utf8))
        }
    }

    /// A sink that only counts (the benchmark measures the sweep, not Kafka).
    final class CountingSink: RecoveredJobSink {
        let count = Atomic(0)
        func publish(_ job: ReceiptJob) async throws { count.add(1, ordering: .relaxed) }
    }

    public static func run(
        voided: Int, pageSize: Int, quotaShare: Double, minuteQuota: Int
    ) async throws -> Result {
        let package = "com.example.verifyworker.play"
        let google = StubGoogle(voided: voided, pageSize: pageSize)
        let clock = ContinuousClock()
        let budget = max(1, Int((quotaShare * Double(minuteQuota)).rounded(.down)))
        let gate = AppleCallGate(
            configuration: .googlePlay(workerID: "bench-reconcile", minuteQuota: budget), clock: clock)
        let account = try GooglePlayServiceAccount(
            clientEmail: "bench@example.iam.gserviceaccount.com", privateKeyID: "bench",
            privateKeyPEM: try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation)
        let tokens = GooglePlayAccessTokens(
            account: account, tokenURL: "http://google.invalid/token", transport: google,
            admission: GooglePlayAccessTokens.admission(through: gate))
        var logger = Logger(label: "bench.reconcile-play")
        logger.logLevel = .error
        let client = GooglePlayAPIClient(
            configuration: GooglePlayAPIConfiguration(
                baseURL: "http://google.invalid", tokenURL: "http://google.invalid/token"),
            transport: google, tokens: tokens, gate: gate, clock: clock, logger: logger)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "bench-reconcile-play-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sink = CountingSink()
        let sweepLogger = logger
        return try await LedgerFactory.withLedger(
            url: "sqlite:" + directory.appendingPathComponent("ledger.sqlite").path,
            configuration: LedgerConfiguration()
        ) { ledger in
            try await ledger.migrate()
            var settings = GooglePlayReconcileSettings()
            settings.pageSize = pageSize
            settings.leaseDuration = .seconds(600)
            let sweep = GooglePlayVoidedSweep(
                packageName: package, settings: settings, store: ledger, source: client, sink: sink,
                quota: GooglePlayQuotaShare(callsPerMinute: budget, clock: clock), clock: clock, holder: "bench",
                logger: sweepLogger,
                productType: { token in
                    guard let claims = try? await ledger.subscriptionClaims(originalTransactionID: token),
                        !claims.isEmpty
                    else { return nil }
                    return claims.contains { $0.productType == .autoRenewable } ? 1 : 2
                })
            let started = clock.now
            let outcome = await sweep.sweep()
            let elapsed = clock.now - started
            var pages = 0
            var text = "\(outcome)"
            if case .completed(_, let swept, _) = outcome {
                pages = swept
                text = "completed"
            }
            let calls = google.calls.withLock { $0 }
            let busiest = Dictionary(grouping: calls, by: { $0 / 60_000 }).values.map(\.count).max() ?? 0
            return Result(
                voided: voided, pageSize: pageSize, pages: pages, calls: calls.count,
                tokenExchanges: google.tokens.load(ordering: .relaxed), jobs: sink.count.load(ordering: .relaxed),
                budgetCallsPerMinute: budget, busiestMinuteCalls: busiest, callsWithinPages: calls.count <= pages,
                quotaShareHeld: busiest <= budget,
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18,
                result: text)
        }
    }
}
