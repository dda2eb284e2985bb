import Foundation
import Messages
import Testing

/// The catalog's Google Play apps and products (`play_apps`, `play_products`): file references only, validated at
/// start with one line per fault, entitlement names shared with the App Store's products, and catalogs without
/// them read and written as before.
@Suite("Catalog: Google Play apps and products")
struct CatalogPlayTests {
    static let example = #"""
        {
          "bundle_ids": ["com.example.app"],
          "products": [{ "id": "pro.monthly", "type": "auto_renewable", "entitlements": ["premium"] }],
          "play_apps": [
            { "package_name": "com.example.app", "licensing_key_file": "/run/secrets/play-licensing-key",
              "service_account_key_file": "/run/secrets/play-service-account.json" }
          ],
          "play_products": [
            { "id": "coins_100", "type": "consumable" },
            { "id": "premium_forever", "type": "non_consumable", "entitlements": ["premium"] },
            { "id": "pro", "type": "subscription", "base_plans": ["monthly", "yearly"], "entitlements": ["premium"] }
          ]
        }
        """#

    static func load(_ json: String, for reading: Catalog.Reading = .verification) throws(CatalogError) -> Catalog {
        try Catalog.load(json: Data(json.utf8), for: reading)
    }

    @Test("the documented example reads: Play apps by file reference, Play products with one entitlement namespace")
    func example() throws {
        let catalog = try Self.load(Self.example)
        #expect(
            catalog.playApps == [
                .init(
                    packageName: "com.example.app", licensingKeyFile: "/run/secrets/play-licensing-key",
                    serviceAccountKeyFile: "/run/secrets/play-service-account.json")
            ])
        #expect(catalog.listsApp("com.example.app", in: .googlePlay))
        #expect(!catalog.listsApp("com.example.other", in: .googlePlay))
        #expect(catalog.playProducts["coins_100"]?.type == .consumable)
        #expect(catalog.playProducts["coins_100"]?.entitlements == [])
        #expect(catalog.playProducts["pro"]?.type == .autoRenewable)
        #expect(catalog.playProducts["pro"]?.basePlans == ["monthly", "yearly"])
        // Premium bought on either store is one entitlement.
        #expect(catalog.playProducts["pro"]?.entitlements == catalog.products["pro.monthly"]?.entitlements)
        #expect(catalog.listsProduct("pro", in: .googlePlay) && !catalog.listsProduct("pro", in: .appStore))
        #expect(
            catalog.listsProduct("pro.monthly", in: .appStore) && !catalog.listsProduct("pro.monthly", in: .googlePlay))
        // The entitlement service reads the Play products too (not the apps: it needs no key).
        let service = try Self.load(Self.example, for: .entitlements)
        #expect(service.playProducts == catalog.playProducts)
        #expect(service.playApps.isEmpty)
    }

    @Test("the JSON written is the JSON read; a catalog without Google Play writes no Play key")
    func encodes() throws {
        let catalog = try Self.load(Self.example)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(catalog), as: UTF8.self)
        #expect(try Self.load(text) == catalog)
        #expect(text.contains(#""type":"subscription""#))
        let apple = Catalog(bundleIDs: ["b"], products: [.init(id: "p", type: .nonConsumable)])
        let appleText = String(decoding: try encoder.encode(apple), as: UTF8.self)
        #expect(appleText == #"{"bundle_ids":["b"],"products":[{"id":"p","type":"non_consumable"}]}"#)
    }

    @Test(
        "each fault stops the start with one line naming the entry, never a secret",
        arguments: [
            (#""play_apps":{}"#, "play_apps has the wrong type (a list of objects)"),
            (#""play_apps":[]"#, "play_apps is empty (leave it out when not selling on Google Play)"),
            (
                #""play_apps":[{"package_name":"a","licensing_key":"MIIB","licensing_key_file":"/k","service_account_key_file":"/s"}]"#,
                "play_apps[0].licensing_key: the catalog names keys by file only (licensing_key_file, service_account_key_file)"
            ),
            (
                #""play_apps":[{"licensing_key_file":"/k","service_account_key_file":"/s"}]"#,
                "play_apps[0].package_name must be a string of 1 to 256 bytes"
            ),
            (
                #""play_apps":[{"package_name":"a","service_account_key_file":"/s"}]"#,
                "play_apps[0] (a).licensing_key_file is missing (a file path)"
            ),
            (
                #""play_apps":[{"package_name":"a","licensing_key_file":"/k"}]"#,
                "play_apps[0] (a).service_account_key_file is missing (a file path)"
            ),
            (
                #""play_apps":[{"package_name":"a","licensing_key_file":"/k","service_account_key_file":"/s"},{"package_name":"a","licensing_key_file":"/k","service_account_key_file":"/s"}]"#,
                "play_apps[1].package_name a is listed twice"
            ),
            (#""play_products":{}"#, "play_products has the wrong type (a list of objects)"),
            (
                #""play_products":[{"id":"x","type":"auto_renewable"}]"#,
                "play product x: \"type\" must be one of consumable, non_consumable, subscription"
            ),
            (
                #""play_products":[{"id":"x","type":"subscription"}]"#,
                "play product x: a subscription lists its \"base_plans\" (at least one)"
            ),
            (
                #""play_products":[{"id":"x","type":"non_consumable","base_plans":["m"]}]"#,
                "play product x: only a subscription has \"base_plans\""
            ),
            (
                #""play_products":[{"id":"x","type":"subscription","base_plans":["m","m"]}]"#,
                "play product x: a base plan is listed twice"
            ),
            (
                #""play_products":[{"id":"x","type":"consumable","entitlements":["e"]}]"#,
                "play product x: a consumable grants no entitlement (it is counted)"
            ),
            (
                #""play_products":[{"id":"x","type":"non_consumable","entitlements":"e"}]"#,
                "play product x: \"entitlements\" must be a list of strings of 1 to 256 bytes"
            ),
            (
                #""play_products":[{"id":"x","type":"consumable"},{"id":"x","type":"consumable"}]"#,
                "play_products[1].id x is listed twice"
            ),
            (#""play_products":[{"type":"consumable"}]"#, "play_products[0].id must be a string of 1 to 256 bytes"),
        ])
    func faults(fragment: String, line: String) {
        let json = #"{"bundle_ids":["b"],"products":[{"id":"p","type":"consumable"}],"# + fragment + "}"
        #expect(throws: CatalogError(line)) { try Self.load(json) }
        #expect(!line.contains("\n"))
        #expect(!line.contains("MIIB"))
    }

    @Test("catalogs without Google Play read exactly as before")
    func appleOnly() throws {
        let json = #"{"bundle_ids":["b"],"products":[{"id":"p","type":"consumable"}]}"#
        let catalog = try Self.load(json)
        #expect(catalog.playApps.isEmpty && catalog.playProducts.isEmpty)
        #expect(catalog == Catalog(bundleIDs: ["b"], products: [.init(id: "p", type: .consumable)]))
    }
}
