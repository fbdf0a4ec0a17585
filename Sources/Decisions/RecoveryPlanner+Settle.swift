import Foundation
package import LedgerModel

extension RecoveryPlanner {
    /// What became of a planned decision once its page was written, from what the database
    /// reports the write changed (`written`; nil in a dry run, where the plan stands). Pure, and
    /// the one rule for pass 1 and for `ingest`:
    /// - a notification the plan meant to insert that the database already had (a live webhook or
    ///   another run recorded it between the plan's read and its write) was already recorded;
    /// - an application whose subscription row a newer write overtook meanwhile changed nothing:
    ///   stale.
    package static func settle(_ decision: Decision, batch: LedgerBatch, written: LedgerBatchOutcome?) -> Action {
        guard let written, decision.action == .applied || decision.action == .stale else { return decision.action }
        if let uuid = decision.notificationUUID.flatMap(UUID.init(uuidString:)), !written.insertedNotifications.contains(uuid) {
            return .alreadyRecorded
        }
        if decision.action == .applied, let customer = decision.originalTransactionId,
            batch.subscriptions.contains(where: { $0.originalTransactionId == customer }),
            !written.writtenSubscriptions.contains(customer)
        {
            return .stale
        }
        return decision.action
    }
}
