import Foundation
import LedgerModel

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
    package init() {}
}
