package import Foundation

/// The notification types pass 2's selections of recovered customers treat apart, as the ledger
/// stores them: policy, given by the caller (`NotificationTypePolicy.recoveredTypes` in
/// Decisions), not kept here.
package struct RecoveredTypes: Hashable, Sendable {
    /// Their recovery asks Apple for the account's transaction history, not only its statuses.
    package var needingTransactionHistory: [String]
    /// The refund flow: selected however they were recorded (live or recovered).
    package var refundFlow: [String]
    /// A refund request's decisions (REFUND, REFUND_DECLINED): whether one was signed after a
    /// recorded notification is part of the evidence the ledger returns.
    package var refundDecisions: [String]

    package init(needingTransactionHistory: [String], refundFlow: [String], refundDecisions: [String]) {
        self.needingTransactionHistory = needingTransactionHistory
        self.refundFlow = refundFlow
        self.refundDecisions = refundDecisions
    }
}

/// One notification the ledger recorded for a customer that pass 2 has not checked: its type,
/// when Apple signed it, and whether a refund decision for the same customer was signed after
/// it. Facts; `RecoveryEvidence` (Decisions) judges them.
package struct RecoveredNotification: Hashable, Sendable {
    package var type: String
    package var signedDate: Date
    package var decidedLater: Bool
    /// A dry run's: the subtype and the transaction it carries, for the gap rules to judge the
    /// ledger as the real run would leave it (`LedgerOverlay.view(of:ledger:recovered:)`).
    package var subtype: String?
    package var transactionId: String?

    package init(type: String, signedDate: Date, decidedLater: Bool = false, subtype: String? = nil, transactionId: String? = nil) {
        self.subtype = subtype
        self.transactionId = transactionId
        self.type = type
        self.signedDate = signedDate
        self.decidedLater = decidedLater
    }
}
