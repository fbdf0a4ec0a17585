import Decisions
import Foundation
import LedgerModel
import Testing

@testable import Reconciliation

/// A dry run's pass 2 compares Apple's answers with the ledger as pass 1 would have left it: the
/// stored transactions of an account with pass 1's planned versions on top (`CustomerRepair.merge`).
@Suite("A dry run's overlay of pass 1 on the ledger")
struct OverlayMergeTests {
    static func transaction(_ id: String, customer: String, signedAt seconds: TimeInterval) -> TransactionRecord {
        TransactionRecord(
            transactionId: id, originalTransactionId: customer, productId: nil, productType: nil, purchaseDate: nil,
            expiresDate: nil, revocationDate: nil, revocationReason: nil, isUpgraded: nil,
            signedDate: Date(timeIntervalSince1970: seconds), environment: "Sandbox", bundleId: "com.example", signedTransaction: "\(id)@\(seconds)"
        )
    }

    @Test func anAccountGetsItsOwnMembersNewerPlannedTransactionsAndNoOneElses() {
        var overlay = RecoveryReport.LedgerOverlay()
        overlay.transactions = [
            "a1": Self.transaction("a1", customer: "A", signedAt: 200),  // newer than stored: taken
            "a2": Self.transaction("a2", customer: "A", signedAt: 50),  // older than stored: not taken
            "a3": Self.transaction("a3", customer: "A2", signedAt: 10),  // another member of the account: added
            "b1": Self.transaction("b1", customer: "B", signedAt: 300),  // another account: left out
        ]
        let stored = [Self.transaction("a1", customer: "A", signedAt: 100), Self.transaction("a2", customer: "A", signedAt: 100)]
        let merged = AccountRepairMachine.merge(stored, overlay, customers: ["A", "A2"])
        let signed = Dictionary(uniqueKeysWithValues: merged.map { ($0.transactionId, $0.signedTransaction) })
        #expect(signed == ["a1": "a1@200.0", "a2": "a2@100.0", "a3": "a3@10.0"])
        #expect(overlay.transactionsByCustomer["B"]?.map(\.transactionId) == ["b1"])
        overlay.transactions = [:]
        #expect(overlay.transactionsByCustomer.isEmpty, "the index follows the transactions it was set with")
        #expect(AccountRepairMachine.merge(stored, overlay, customers: ["A"]).count == 2)
    }
}
