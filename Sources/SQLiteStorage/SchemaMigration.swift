/// One numbered step of a store's schema (the ledger's, the entitlement store's), for one backend: its statements
/// run in order inside one transaction. A released migration is never edited: changes are new versions appended.
public struct SchemaMigration: Sendable {
    public var version: Int
    public var name: String
    public var statements: [String]

    public init(version: Int, name: String, statements: [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }
}
