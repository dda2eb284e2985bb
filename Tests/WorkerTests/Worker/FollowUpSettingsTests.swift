import Foundation
import Messages
import Operations
import RateLimiter
import Testing
import Worker

/// The settings of the follow-ups (configuration keys, catalog keys, rate limits).
@Suite("Pipeline: follow-up call settings")
struct FollowUpSettingsTests {
    static func configuration(_ environment: [String: String]) throws -> WorkerConfiguration {
        var sources = ConfigurationSources()
        sources.addEnvironment(["VERIFY_CATALOG_FILE": "catalog.json"].merging(environment) { $1 })
        return try WorkerConfiguration(sources, hostName: "host-1") { path in
            throw MissingResource(what: path, hint: "")
        }
    }

    @Test("off by default; switched on without a Server API key, the worker refuses to start naming the key")
    func keys() throws {
        let defaults = try Self.configuration([:])
        #expect(!defaults.finishTransactions && !defaults.consumptionAnswers && !defaults.consumptionCustomerConsented)
        for (name, key) in [
            ("VERIFY_FINISH_TRANSACTIONS", "finish_transactions"),
            ("VERIFY_CONSUMPTION_ANSWERS", "consumption_answers"),
        ] {
            #expect {
                _ = try Self.configuration([name: "true"])
            } throws: { error in
                (error as? ConfigurationError)?.key == key
            }
        }
        let on = try Self.configuration([
            "VERIFY_FINISH_TRANSACTIONS": "true", "VERIFY_CONSUMPTION_ANSWERS": "true",
            "VERIFY_CONSUMPTION_CUSTOMER_CONSENTED": "true", "VERIFY_SERVER_API_KEY": "pem",
            "VERIFY_SERVER_API_KEY_ID": "K", "VERIFY_SERVER_API_ISSUER_ID": "I",
        ])
        #expect(on.finishTransactions && on.consumptionAnswers && on.consumptionCustomerConsented)
        #expect(defaults.serverAPIProductionURL == "https://api.storekit.apple.com")
        #expect(defaults.serverAPISandboxURL == "https://api.storekit-sandbox.apple.com")
    }

    @Test("catalog: refund_preference and sample_content_provided are read, written back, and refused when malformed")
    func catalogKeys() throws {
        let json = #"""
            {"bundle_ids":["b"],"products":[
              {"id":"coins","type":"consumable","refund_preference":"GRANT_PRORATED","sample_content_provided":true},
              {"id":"plain","type":"non_consumable"}]}
            """#
        let catalog = try Catalog.load(json: Data(json.utf8))
        #expect(catalog.products["coins"]?.refundPreference == "GRANT_PRORATED")
        #expect(catalog.products["coins"]?.sampleContentProvided == true)
        #expect(catalog.products["plain"]?.refundPreference == nil)
        #expect(catalog.products["plain"]?.sampleContentProvided == nil)
        let written = try JSONEncoder().encode(catalog)
        #expect(try Catalog.load(json: written) == catalog)
        for bad in [#""refund_preference":"MAYBE""#, #""refund_preference":1"#, #""sample_content_provided":"yes""#] {
            let text = #"{"bundle_ids":["b"],"products":[{"id":"p","type":"consumable",\#(bad)}]}"#
            #expect(throws: CatalogError.self, "\(bad)") { try Catalog.load(json: Data(text.utf8)) }
        }
    }

    @Test("each Server API endpoint has Apple's documented limit, a tenth of it in the sandbox")
    func rateLimits() {
        let expected: [(StoreEndpoint, Double)] = [
            (.transactionInfo, 50), (.notificationHistory, 50), (.consumptionInformation, 50),
            (.finishTransaction, 50), (.appTransactionInfo, 50), (.appAccountToken, 20), (.refundHistory, 10),
            (.testNotification, 1), (.testNotificationStatus, 1),
        ]
        for (endpoint, rate) in expected {
            #expect(EndpointRateLimit.appStoreServerAPI(endpoint, environment: .production)?.ratePerSecond == rate)
            #expect(EndpointRateLimit.appStoreServerAPI(endpoint, environment: .sandbox)?.ratePerSecond == rate / 10)
        }
        #expect(EndpointRateLimit.appStoreServerAPI(.verifyReceipt, environment: .production) == nil)
        let defaults = EndpointRateLimit.appleDefaults(environment: .production)
        #expect(EndpointRateLimit.appStoreServerAPIEndpoints.allSatisfy { defaults[$0] != nil })
    }
}
