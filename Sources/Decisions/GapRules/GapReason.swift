import Foundation

/// Why a customer is repaired through Get Transaction History. The raw values are stable: they
/// appear in reports.
package enum GapReason: String, Hashable, Sendable, Codable, CaseIterable {
    /// A notification of this customer was recovered from history (or found stale) by this run,
    /// in its window: history holds point-in-time snapshots, so ask Apple for the present.
    case recoveredInWindow = "recovered-in-window"
    /// A payload of this customer was rejected or left for retry in the window.
    case payloadRejected = "payload-rejected"
    /// Apple owes the subscription a notification whose due time passed over `overdueAfter` ago
    /// with nothing recorded since (`SubscriptionDue`: recorded active past its expiry and grace
    /// period, in billing grace past its end, in billing retry past Apple's 60 days). It replaced
    /// `active-but-expired`, `grace-period-ended` and `billing-retry-ended` (issue 64), which
    /// selected the same accounts.
    case overdue
    /// The subscription row is older than the customer's newest transaction.
    case rowOlderThanTransactions = "row-older-than-transactions"
    /// A renewal was purchased after the previous period had expired, with no billing failure
    /// or expiry recorded in between: a period's notifications are missing.
    case transactionChainGap = "transaction-chain-gap"
    /// The notifications skip a step: expired voluntarily without auto-renew turned off, or
    /// for billing without a billing failure.
    case skippedStep = "skipped-step"
    /// A refund-flow notification (REFUND, REFUND_REVERSED, REFUND_DECLINED, CONSUMPTION_REQUEST)
    /// was recorded after the account's transaction history was last checked: it is about the
    /// transaction refunded (perhaps a plan the customer upgraded from), so the row keeps its
    /// product and expiry, and Apple is asked for the current transaction.
    case refundFlow = "refund-flow"
    /// A notification written since the last verification left the subscription on an older
    /// period than a transaction of it the ledger recorded: Apple signed it late, out of order
    /// (a DID_FAIL_TO_RENEW hours after the DID_RENEW that ended the billing trouble), and
    /// "the later signedDate wins" took it over the renewal.
    case contradictedByTransactions = "contradicted-by-transactions"
    /// Named by the operator (`repair --transaction-id`).
    case named
    /// Named by a line of an `import`'s input: the account is imported whole.
    case imported
    /// Drawn into an `audit`'s sample: compared whole (statuses, and the transaction history
    /// from its start), as a named repair is.
    case audited
}

extension GapReason {
    /// Whether answering for this reason needs the account's transaction history (older or
    /// one-time transactions, refunds), or the subscription statuses alone tell the truth.
    package var needsTransactionHistory: Bool {
        switch self {
        case .payloadRejected, .transactionChainGap, .refundFlow, .overdue, .named, .imported, .audited: true
        case .recoveredInWindow, .rowOlderThanTransactions, .skippedStep,
            .contradictedByTransactions:
            false
        }
    }
}
