/// The notification types pass 2's selections of recovered customers treat apart, as the ledger
/// stores them: policy, given by the caller (`NotificationTypePolicy.recoveredTypes` in
/// Decisions), not kept here.
package struct RecoveredTypes: Hashable, Sendable {
    /// Their recovery asks Apple for the account's transaction history, not only its statuses.
    package var needingTransactionHistory: [String]
    /// The refund flow: selected however they were recorded (live or recovered).
    package var refundFlow: [String]

    package init(needingTransactionHistory: [String], refundFlow: [String]) {
        self.needingTransactionHistory = needingTransactionHistory
        self.refundFlow = refundFlow
    }
}
