import Foundation
import Messages
import Testing

/// The one catalog type read by the worker and by the entitlement service: each keeps its strictness.
@Suite("Catalog")
struct CatalogTests {
    static func load(_ json: String, for reading: Catalog.Reading) -> Result<Catalog, CatalogError> {
        Result { () throws(CatalogError) in try Catalog.load(json: Data(json.utf8), for: reading) }
    }

    @Test("a consumable listing entitlements: the worker reads it as before, the entitlement service refuses it")
    func consumableWithEntitlements() throws {
        let json = #"{"bundle_ids":["b"],"products":[{"id":"c","type":"consumable","entitlements":["x"]}]}"#
        let catalog = try Self.load(json, for: .verification).get()
        #expect(catalog.productType(of: "c") == .consumable)
        #expect(catalog.entitlements(of: "c", type: .consumable) == [])
        #expect(throws: CatalogError.self) { try Self.load(json, for: .entitlements).get() }
    }

    @Test("bundle_ids is the worker's: a malformed list fails there only; products are required by the service only")
    func readingsDiffer() throws {
        let badBundles = #"{"bundle_ids":"b","products":[{"id":"p","type":"non_consumable"}]}"#
        if case .failure(let error) = Self.load(badBundles, for: .verification) {
            #expect(error.description == "bundle_ids has the wrong type")
        } else {
            Issue.record("the worker accepted a string for bundle_ids")
        }
        #expect(try Self.load(badBundles, for: .entitlements).get().productType(of: "p") == .nonConsumable)
        let noProducts = #"{"bundle_ids":["b"]}"#
        #expect(try Self.load(noProducts, for: .verification).get().products.isEmpty)
        #expect(throws: CatalogError.self) { try Self.load(noProducts, for: .entitlements).get() }
    }

    @Test("each reader words a bad type as it always did (docs/CONFIGURATION.md quotes the worker's line)")
    func wording() {
        let json = #"{"bundle_ids":["b"],"products":[{"id":"m","type":"lifetime"}]}"#
        let types = "consumable, non_consumable, auto_renewable, non_renewing"
        #expect(throws: CatalogError("products[0].type is not one of \(types)")) {
            try Self.load(json, for: .verification).get()
        }
        #expect(throws: CatalogError("product m: \"type\" must be one of \(types)")) {
            try Self.load(json, for: .entitlements).get()
        }
    }

    @Test("the JSON written is the JSON read, entitlements only where they are not the default")
    func encodes() throws {
        let catalog = Catalog(
            bundleIDs: ["b"],
            products: [
                .init(id: "p", type: .nonConsumable),
                .init(id: "m", type: .autoRenewable, entitlements: ["premium"]),
            ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(catalog), as: UTF8.self)
        #expect(
            text
                == #"{"bundle_ids":["b"],"products":[{"entitlements":["premium"],"id":"m","type":"auto_renewable"},{"id":"p","type":"non_consumable"}]}"#
        )
        #expect(try Catalog.load(json: Data(text.utf8)) == catalog)
        #expect(
            try Catalog.load(json: Data(text.utf8), for: .entitlements).entitlements(of: "m", type: .autoRenewable) == [
                "premium"
            ])
    }
}

@Suite("RFC 3339 precisions")
struct RFC3339PrecisionTests {
    @Test("receipt dates drop a zero fraction; PKCS#7 attributes are whole seconds")
    func precisions() {
        let whole = Date(timeIntervalSince1970: 1_697_679_936)
        #expect(RFC3339.format(whole, precision: .millisecondsWhenPresent) == "2023-10-19T01:45:36Z")
        #expect(
            RFC3339.format(whole.addingTimeInterval(0.5), precision: .millisecondsWhenPresent)
                == "2023-10-19T01:45:36.500Z")
        #expect(RFC3339.format(whole.addingTimeInterval(0.999), precision: .seconds) == "2023-10-19T01:45:36Z")
        #expect(RFC3339.format(whole) == "2023-10-19T01:45:36.000Z")
        let bytes = Array("2023-10-19T01:45:36Z".utf8)
        #expect(bytes.withUnsafeBufferPointer { RFC3339.parse($0) } == whole)
    }
}
