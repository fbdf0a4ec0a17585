/// Why a row of `app_store.subscriptions` or `app_store.transactions` changed: the change
/// feed's `cause` (`app_store.changes`).
package enum ChangeCause: String, Sendable, Hashable, Codable {
    /// A live notification Apple delivered (`ingest`).
    case webhook
    /// A missed notification recovered from Get Notification History (pass 1 of a run).
    case history
    /// A repair from Apple's account answers (pass 2 of a run, `repair`).
    case repair
}
