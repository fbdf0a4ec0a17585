package import Foundation
package import LedgerModel

/// One way a customer's rows in the ledger can contradict themselves: a notification or a
/// period is missing. Each rule is a value with its reason, its documentation and its tests
/// (RepairTests' gap rules), and reads nothing but the customer's view and the time.
///
/// A contradiction counts only when it is newer than the account's last verification against
/// Apple: pass 2 cannot change what the notifications say (a chain gap, a skipped step stays in
/// them forever), so once Apple's answer has been applied, only what the ledger records after it,
/// or an expiry that passes after it, selects the account again.
package protocol GapRule: Sendable {
    /// What the report says when the rule selects an account.
    var reason: GapReason { get }
    /// Whether the rule finds its contradiction in `view` at `now`.
    func selects(_ view: CustomerLedgerView, now: Date) -> Bool
}

/// The rules pass 2 applies to every customer the ledger holds.
package enum GapRules {
    /// Every rule, in the order a report lists their reasons, with Apple's notifications overdue
    /// `overdueAfter` past their due time.
    package static func all(overdueAfter: TimeInterval = defaultOverdueAfter) -> [any GapRule] {
        [
            Overdue(after: overdueAfter), RowOlderThanTransactions(), TransactionChainGap(), SkippedStep(), UncheckedRefundFlow(),
            ContradictedByTransactions(),
        ]
    }

    /// The reasons of the rules that select `view` at `now`.
    package static func evaluate(_ view: CustomerLedgerView, now: Date, overdueAfter: TimeInterval = defaultOverdueAfter) -> [GapReason] {
        all(overdueAfter: overdueAfter).filter { $0.selects(view, now: now) }.map(\.reason)
    }

    /// How long after its due time a notification Apple owes may still legitimately be on its way
    /// (`overdueAfter`'s default): Apple retries a failed delivery an hour later first.
    package static let defaultOverdueAfter: TimeInterval = 3600

    /// How long Apple retries billing after a failed renewal ("for up to 60 days").
    package static let billingRetryDuration: TimeInterval = 60 * 86_400

    /// `end` plus `after` has passed, and the account was not verified since.
    static func isOverdue(_ end: Date, _ view: CustomerLedgerView, now: Date, after: TimeInterval) -> Bool {
        let overdue = end.addingTimeInterval(after)
        guard overdue < now else { return false }
        return view.verifiedAt.map { $0 < overdue } ?? true
    }

    /// Whether the ledger recorded this after `verified` (always, when never verified, or when
    /// the time of recording is unknown).
    static func isNews(_ recordedAt: Date?, since verified: Date?) -> Bool {
        guard let verified, let recordedAt else { return true }
        return recordedAt > verified
    }
}
