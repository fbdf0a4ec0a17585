import Foundation
package import LedgerModel
package import SignedData

/// Decides what repairing one Apple account changes, from Apple's truth (verified transactions
/// and subscription statuses) and what the ledger holds: a pure value, printed by a dry run and
/// written by a real one. Apple signs its answers when it answers, so an unchanged purchase comes
/// back with a newer `signedDate` every time: only content is compared, never signatures, and a
/// row whose content equals Apple's is neither written nor counted.
package enum RepairPlanner {
    /// Apple's truth for one account.
    package struct Truth: Sendable {
        /// Each transaction's newest verified version, with its JWS (empty when transaction
        /// history was not asked).
        package var transactions: [(payload: TransactionPayload, signed: String)]
        /// Each auto-renewable subscription's state from Get All Subscription Statuses.
        package var subscriptions: [SubscriptionRecord]

        package init(transactions: [(payload: TransactionPayload, signed: String)], subscriptions: [SubscriptionRecord]) {
            self.transactions = transactions
            self.subscriptions = subscriptions
        }
    }

    package struct Change: Sendable, Hashable, Codable {
        /// The subscription the field belongs to (an account may have several).
        package var originalTransactionId: String?
        /// The transaction the field belongs to, for a transaction's field (nil for a subscription's).
        package var transactionId: String? = nil
        package var field: String
        package var before: String?
        package var after: String?
    }

    package struct Plan: Sendable {
        package var batch = LedgerBatch(cause: .repair)
        package var transactionsAdded: [String] = []
        package var transactionsChanged: [String] = []
        /// Transactions whose refund only this repair found (`RevocationKind.isRefund`).
        package var refundsFound: [String] = []
        /// Every revocation only this repair found, refunds or not, with its kind.
        package var revocationsFound: [RevocationFound] = []
        package var changes: [Change] = []
        /// Each changed field of a transaction the ledger held, before → after.
        package var transactionChanges: [Change] = []
    }

    /// A revocation a repair found: the transaction and what it is (`RevocationKind.name`, `.label`).
    package struct RevocationFound: Sendable, Hashable, Codable {
        package var transactionId: String
        package var kind: String
        package var label: String
        package var isRefund: Bool
    }

    package static func plan(
        truth: Truth, storedTransactions: [TransactionRecord], storedSubscriptions: [String: SubscriptionRecord]
    ) -> Plan {
        var plan = Plan()
        let stored = Dictionary(storedTransactions.map { ($0.transactionId, $0) }, uniquingKeysWith: { first, _ in first })
        for (payload, signed) in truth.transactions {
            guard let record = LedgerMapping.transactionRecord(payload, signed: signed, fallbackSignedDate: nil) else { continue }
            guard let existing = stored[record.transactionId] else {
                plan.transactionsAdded.append(record.transactionId)
                plan.noteRevocation(of: record)
                plan.batch.transactions.append(record)
                continue
            }
            // Signed at the same time but saying something else: Apple's answer is the truth
            // (content decides, not only the signing time).
            guard existing.signedDate.unixMilliseconds <= record.signedDate.unixMilliseconds else { continue }
            if sameContent(existing, record) { continue }
            plan.transactionsChanged.append(record.transactionId)
            plan.transactionChanges += TransactionRecord.differences(existing, record).map {
                Change(originalTransactionId: record.originalTransactionId, transactionId: record.transactionId, field: $0.field, before: $0.before, after: $0.after)
            }
            if existing.revocationDate == nil { plan.noteRevocation(of: record) }
            plan.batch.transactions.append(record)
        }
        for truthRow in truth.subscriptions {
            let storedRow = storedSubscriptions[truthRow.originalTransactionId]
            let changes = differences(storedRow, truthRow)
            if !changes.isEmpty, storedRow.map({ $0.lastSignedDate.unixMilliseconds <= truthRow.lastSignedDate.unixMilliseconds }) ?? true {
                plan.changes += changes.map { change in
                    var change = change
                    change.originalTransactionId = truthRow.originalTransactionId
                    return change
                }
                plan.batch.subscriptions.append(truthRow)
                plan.batch.subscriptionsBefore[truthRow.originalTransactionId] = .some(storedRow)
            }
        }
        return plan
    }

    /// The same facts, whatever the signing time (the columns `TransactionRecord.columns` compares).
    static func sameContent(_ lhs: TransactionRecord, _ rhs: TransactionRecord) -> Bool {
        TransactionRecord.sameContent(lhs, rhs)
    }

    /// Field by field, what differs between the stored row and the truth (the columns
    /// `SubscriptionRecord.columns` compares: the signing time and bookkeeping aside).
    static func differences(_ before: SubscriptionRecord?, _ after: SubscriptionRecord) -> [Change] {
        SubscriptionRecord.differences(before, after).map {
            Change(originalTransactionId: nil, field: $0.field, before: $0.before, after: $0.after)
        }
    }

    /// The subscription row Apple's status answer describes.
    package static func subscriptionRecord(status: SubscriptionStatus?, transaction: TransactionPayload, renewal: RenewalInfoPayload?) -> SubscriptionRecord? {
        guard let customer = transaction.originalTransactionId ?? renewal?.originalTransactionId else { return nil }
        let signed = [transaction.signedDate, renewal?.signedDate].compactMap { $0 }.max()
        guard let signedDate = LedgerMapping.date(signed) else { return nil }
        var record = SubscriptionRecord(
            originalTransactionId: customer, productId: transaction.productId, status: status?.rawValue,
            expiresDate: LedgerMapping.date(transaction.expiresDate), autoRenewStatus: renewal?.autoRenewStatus,
            autoRenewProductId: renewal?.autoRenewProductId, isInBillingRetry: renewal?.isInBillingRetryPeriod ?? false,
            gracePeriodExpiresDate: LedgerMapping.date(renewal?.gracePeriodExpiresDate), lastSignedDate: signedDate,
            environment: (transaction.environment ?? renewal?.environment)?.rawValue, bundleId: transaction.bundleId
        )
        LedgerMapping.describe(&record, transaction: transaction, renewal: renewal, current: nil)
        record.renewalSignedDate = LedgerMapping.date(renewal?.signedDate)
        return record
    }
}

extension RepairPlanner.Plan {
    /// Records `record`'s revocation, when it has one: a refund among the refunds, and every kind
    /// among the revocations.
    mutating func noteRevocation(of record: TransactionRecord) {
        guard let kind = RevocationKind(record) else { return }
        if kind.isRefund { refundsFound.append(record.transactionId) }
        revocationsFound.append(.init(transactionId: record.transactionId, kind: kind.name, label: kind.label, isRefund: kind.isRefund))
    }
}
