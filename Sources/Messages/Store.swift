/// The store a purchase was made in, as every message spells it (a verdict's `store`, a proof's kind). The one
/// spelling of store names in the codebase.
public enum Store: String, Sendable, Hashable, Codable, CaseIterable {
    /// Apple's App Store: receipts, signed transactions, transaction ids and App Store Server Notifications.
    case appStore = "app_store"
    /// Google Play: a purchase token with, when the client sent them, the signed purchase data.
    case googlePlay = "google_play"
}
