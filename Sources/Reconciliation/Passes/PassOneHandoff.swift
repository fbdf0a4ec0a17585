import Foundation
import Ledger

/// What pass 2 needs from pass 1: who pass 1 named, and, in a dry run, what it would have
/// written. A value handed from one pass to the other; the report is for people and scripts.
package struct PassOneHandoff: Sendable {
    /// The run both passes belong to; nil in a dry run (nothing recorded).
    package var runId: UUID?
    /// originalTransactionIds read from rejected payloads: unverified, so pass 2 asks Apple only
    /// about those the ledger already knows from verified data.
    package var rejectedCustomers: Set<String>
    /// A dry run's recoveries (customer → whether its notifications need the transaction
    /// history): a real run's are in the ledger, where pass 2 finds them.
    package var recoveredInDryRun: [String: Bool]
    /// What a dry run's pass 1 would have written, for pass 2 to compare against.
    package var overlay: RecoveryReport.LedgerOverlay

    package init(
        runId: UUID?, rejectedCustomers: Set<String> = [], recoveredInDryRun: [String: Bool] = [:],
        overlay: RecoveryReport.LedgerOverlay = .init()
    ) {
        self.runId = runId
        self.rejectedCustomers = rejectedCustomers
        self.recoveredInDryRun = recoveredInDryRun
        self.overlay = overlay
    }

    /// Read from pass 1's report as it ends (its lists are spooled to files; this reads them once).
    init(_ report: RecoveryReport, dryRun: Bool) throws {
        self.init(runId: dryRun ? nil : UUID(uuidString: report.run.id))
        for entry in report.rejected {
            if let customer = entry.originalTransactionId { rejectedCustomers.insert(customer) }
        }
        guard dryRun else { return }
        overlay = report.pass1
        for entry in report.missed {
            guard let customer = entry.originalTransactionId else { continue }
            let needsHistory = LedgerStore.typesNeedingTransactionHistory.contains(entry.notificationType)
            recoveredInDryRun[customer] = (recoveredInDryRun[customer] ?? false) || needsHistory
        }
    }
}
