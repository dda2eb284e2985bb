import Foundation
import Messages
import Operations
import Receipts

extension WorkerConfiguration {
    /// Reads the catalog and trust anchors the configuration names (for `run` and `reconcile` alike). Throws
    /// ``ConfigurationError`` naming the key.
    public func loadDecisionInputs() throws(ConfigurationError) -> (Catalog, TrustStore) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: catalogFile))
        } catch {
            throw ConfigurationError(key: "catalog_file", problem: "cannot read \(catalogFile)")
        }
        let catalog: Catalog
        do {
            catalog = try Catalog.load(json: data)
        } catch {
            throw ConfigurationError(
                key: "catalog_file",
                problem: "not a catalog: \(error.description) (see docs/CONFIGURATION.md)")
        }
        guard !catalog.bundleIDs.isEmpty else {
            throw ConfigurationError(key: "catalog_file", problem: "the catalog lists no bundle id")
        }
        // An empty product list would mean "any product": every purchase of the app, at any price, granted as
        // whatever it claims to be. The worker grants only what the operator listed.
        guard !catalog.products.isEmpty else {
            throw ConfigurationError(
                key: "catalog_file", problem: "the catalog lists no product (list each product id with its type)")
        }
        let trust: TrustStore
        do {
            trust = try TrustStore.apple(addingAnchorsFrom: trustAnchorFiles)
        } catch {
            throw ConfigurationError(key: "trust_anchors", problem: "cannot read a certificate from \(error.path)")
        }
        return (catalog, trust)
    }
}
