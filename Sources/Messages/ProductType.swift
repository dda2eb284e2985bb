/// The type of an in-app product, as App Store Connect defines them; decides which ownership rules apply and
/// which entitlements a purchase grants. The one spelling of product types in the codebase.
public enum ProductType: String, Sendable, Hashable, Codable, CaseIterable {
    case consumable
    case nonConsumable = "non_consumable"
    case autoRenewable = "auto_renewable"
    case nonRenewing = "non_renewing"
}
