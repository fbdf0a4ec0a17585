package import AppStoreServerAPI
package import Decisions
package import Foundation
package import Ledger
import Logging
package import SignedData

/// `audit` (issue 64, point 2): draws a uniformly random sample of one App Store's subscriptions
/// (`AuditSampler`, over the sample keys of migration 0030: a probe an index lookup, never the
/// whole ledger), asks Apple about each one's account whole as a named repair does (Get All
/// Subscription Statuses and the transaction history from its start, every answer verified), and
/// compares field by field (`RepairPlanner`). Without `repair` it writes nothing to the ledger (the
/// accounts are repaired as a dry run is); with it, Apple's answer is written over what differs.
/// What it found is a `LedgerAuditReport`, its bound over what was compared: an audit cut short
/// (stopped, Apple not answering) says so and keeps what it had.
package struct LedgerAudit: Sendable {
    package let repairPass: CustomerRepair
    package let store: LedgerStore
    /// Spaces the accounts so that the audit's requests stay within a share of Apple's rate (the
    /// nightly's audit); nil: the client's own limits alone (`audit`).
    package let pace: RateLimiter?

    package init(repairPass: CustomerRepair, store: LedgerStore, pace: RateLimiter? = nil) {
        self.repairPass = repairPass
        self.store = store
        self.pace = pace
    }

    var pair: AppStorePair { repairPass.verifier.configuration.pair }

    /// What drawing cost, besides the sample: the keys looked up (the sampler's memory is a
    /// number per key tried) and the rows read when probing could not pay.
    package struct DrawCost: Sendable {
        package var probes = 0
        package var lookups = 0
        package var rowsRead = 0

        package init() {}
    }

    /// The sample of `pair`'s subscriptions, and what drawing it cost.
    package static func draw(_ wanted: Int, pair: AppStorePair, store: LedgerStore) async throws -> (ids: [String], wholeLedger: Bool, cost: DrawCost) {
        var cost = DrawCost()
        guard let range = try await store.sampleKeyRange(pair: pair) else { return ([], true, cost) }
        var random = SystemRandomNumberGenerator()
        var sampler = AuditSampler(wanted: wanted, lowest: range.lowest, highest: range.highest)
        var action = sampler.start(using: &random)
        while true {
            switch action {
            case .probe(let keys):
                cost.probes += keys.count
                cost.lookups += 1
                action = sampler.probed(try await store.subscriptions(atSampleKeys: keys, pair: pair), using: &random)
            case .readAll:
                var cursor: String?
                while true {
                    let rows = try await store.subscriptionsWithSampleKeys(pair: pair, after: cursor, limit: 5_000)
                    guard let last = rows.last else { break }
                    cursor = last.originalTransactionId
                    cost.rowsRead += rows.count
                    sampler.offered(rows, using: &random)
                }
                action = sampler.streamEnded()
            case .done(let ids, let wholeLedger):
                return (ids, wholeLedger, cost)
            }
        }
    }

    /// Draws the sample and compares (or, with `repair`, repairs) its accounts.
    /// - Parameter runId: the run the writes belong to (with `repair`).
    package func run(sample: Int, repair: Bool, runId: UUID?) async throws -> (audit: LedgerAuditReport, repairs: ReportList<RecoveryReport.Repair>, stopped: Bool) {
        let drawn = try await Self.draw(sample, pair: pair, store: store)
        let targets = drawn.ids.map { CustomerRepair.Target(customer: $0, reasons: [.audited], needsTransactionHistory: true) }
        let compared = try ReportList<RecoveryReport.Repair>()
        var stopped = false
        var cutShort = false
        do {
            _ = try await repairPass.repair(
                dryRun: !repair, runId: runId,
                finished: { [pace] _, entry in
                    guard let entry else { return nil }
                    compared.append(entry)
                    // Past the two slots the account took as it started: one for each further page.
                    for _ in 0..<max(0, entry.subscriptionStatusesRequests + entry.transactionHistoryRequests - 2) { try await pace?.acquire() }
                    return entry
                },
                produce: { [pace] emit in
                    for target in targets {
                        // An account asks at least twice: its statuses and a page of its history.
                        try await pace?.acquire()
                        try await pace?.acquire()
                        try await emit(target)
                    }
                }
            )
        } catch is RunStopped {
            stopped = true
        } catch let error as RetriesExhausted {
            // Apple stopped answering: what was compared stands, and the audit says it was cut short.
            repairPass.logger.warning("audit cut short: \(error)")
            cutShort = true
        }
        let audit = LedgerAuditReport(requested: sample, wholeLedger: drawn.wholeLedger, repaired: repair, accounts: compared, stopped: stopped || cutShort)
        return (audit, compared, stopped)
    }
}
