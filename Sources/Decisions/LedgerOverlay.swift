package import Foundation
package import LedgerModel

/// What pass 1 wrote, or in a dry run would have written (`PassOneResult.overlay`).
package struct LedgerOverlay: Sendable {
    package var subscriptions: [String: SubscriptionRecord] = [:]
    package var transactions: [String: TransactionRecord] = [:] {
        didSet { transactionsByCustomer = Dictionary(grouping: transactions.values, by: \.originalTransactionId) }
    }
    /// `transactions` by the customer (`originalTransactionId`) each is of, regrouped at each
    /// change of `transactions` (set it whole, not element by element): pass 2 looks up
    /// each account's members here (scanning every transaction per account cost a dry run
    /// over 14,657 notifications a fifth of its CPU).
    package private(set) var transactionsByCustomer: [String: [TransactionRecord]] = [:]
    /// A dry run with a delivery target: the notifications pass 1 would record (notificationUUID, signedDate).
    package var wouldRecord: [(uuid: String, signedDate: Date)] = []
    /// A dry run: the refund requests pass 1 would record, one per notification (the answering
    /// pass merges them with the ledger's, `RefundAnswerMachine.requests`, and reads their
    /// product types from `transactions`).
    package var refundRequests: [OpenRefundRequest] = []
    /// A dry run: the latest decision (REFUND, REFUND_DECLINED) pass 1 would record, by transaction.
    package var refundDecisions: [String: Date] = [:]

    /// Notes the refund requests and decisions a dry run's batch would write.
    package mutating func noteRefundEpisodes(of batch: LedgerBatch) {
        let requests = Dictionary(batch.consumptionRequests.map { ($0.notificationUUID, $0) }, uniquingKeysWith: { first, _ in first })
        for notification in batch.notifications {
            guard let transactionId = notification.transactionId else { continue }
            switch notification.refundEpisode {
            case .decision?:
                refundDecisions[transactionId] = max(refundDecisions[transactionId] ?? .distantPast, notification.signedDate)
            case .request?:
                guard let request = requests[notification.notificationUUID] else { continue }
                refundRequests.append(
                    OpenRefundRequest(
                        transactionId: transactionId, originalTransactionId: request.originalTransactionId, appAccountToken: request.appAccountToken,
                        productId: request.productId, productType: nil, deadline: request.deadlineDate,
                        signedDate: notification.signedDate, rows: 0
                    )
                )
            case nil:
                continue
            }
        }
    }
    package init() {}

    /// The view a real run's gap rules would have of `customer` once pass 1 is written: the
    /// ledger's (`ledger`, nil when it has no subscription row of the customer) with the rows
    /// this dry run would write and the notifications it would record (`recovered`, newer than
    /// any verification, as written now). Nil when neither has a subscription row.
    package func view(of customer: String, ledger: CustomerLedgerView?, recovered: [RecoveredNotification]) -> CustomerLedgerView? {
        guard let subscription = subscriptions[customer] ?? ledger?.subscription else { return nil }
        let written = transactionsByCustomer[customer] ?? []
        // Most of a dry run's scan: a customer pass 1 leaves alone is seen as the ledger holds it.
        if let ledger, subscriptions[customer] == nil, written.isEmpty, recovered.isEmpty { return ledger }
        var view = ledger ?? CustomerLedgerView(originalTransactionId: customer, subscription: nil, transactions: [], notifications: [])
        view.subscription = subscription
        let replaced = Set(written.map(\.transactionId))
        let facts = written.map { row in
            CustomerLedgerView.TransactionFacts(
                transactionId: row.transactionId, productType: row.productType, purchaseDate: row.purchaseDate, expiresDate: row.expiresDate,
                revocationDate: row.revocationDate, signedDate: row.signedDate, isUpgraded: row.isUpgraded
            )
        }
        view.transactions = (view.transactions.filter { !replaced.contains($0.transactionId) } + facts)
            .sorted { ($0.purchaseDate ?? .distantFuture) < ($1.purchaseDate ?? .distantFuture) }
        let added = recovered.map { CustomerLedgerView.NotificationFacts(type: $0.type, subtype: $0.subtype, signedDate: $0.signedDate, transactionId: $0.transactionId) }
        view.notifications = (view.notifications + added).sorted { $0.signedDate < $1.signedDate }
        return view
    }
}
