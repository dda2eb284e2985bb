import CodedErrors
import Logging

/// Builds the store a URL names: `postgres://…` (or `postgresql://…`) or `sqlite:PATH`.
public enum EntitlementStoreFactory {
    public static func make(url: String, logger: Logger) throws -> any EntitlementStore {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return try PostgresEntitlementStore(url: url, logger: logger)
        }
        if url.hasPrefix("sqlite:") {
            let path = String(url.dropFirst("sqlite:".count))
            guard !path.isEmpty else {
                throw EntitlementStoreError(.invalidConfiguration, "sqlite: needs a path (sqlite:/var/lib/x.sqlite)")
            }
            return try SQLiteEntitlementStore(path: path, logger: logger)
        }
        throw EntitlementStoreError(.invalidConfiguration, "the store URL must start with postgres:// or sqlite:")
    }
}
