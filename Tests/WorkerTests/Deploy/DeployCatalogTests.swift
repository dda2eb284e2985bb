import Foundation
import Messages
import Receipts
import Testing
import Worker

@Suite("Deployment catalogs")
struct DeployCatalogTests {
    @Test(
        "every catalog shipped in deploy/ loads as the worker loads it",
        arguments: ["deploy/compose/catalog.json", "deploy/kubernetes/base/catalog.json"])
    func catalogLoads(path: String) throws {
        let data = try Data(contentsOf: TestEnvironment.packageRoot.appendingPathComponent(path))
        let catalog = try Catalog.load(json: data)
        #expect(!catalog.bundleIDs.isEmpty)
        #expect(!catalog.products.isEmpty)
    }
}
