import AppStoreServerAPI
import Decisions
import Foundation
import Ledger
import SignedData

/// The I/O before planning a batch, shared by recovery and ingest: verify the payloads in
/// parallel, then read what the ledger holds for them in one round of queries.
enum PageInputs {
    static func verify(_ items: [NotificationHistoryItem], with verifier: SignedDataVerifier) async -> [RecoveryPlanner.Input] {
        await withTaskGroup(of: (Int, RecoveryPlanner.Input).self) { group in
            for (index, item) in items.enumerated() {
                group.addTask { (index, RecoveryPlanner.Input(item: item, outcome: await verifier.verifyNotification(item.signedPayload))) }
            }
            var collected = [RecoveryPlanner.Input?](repeating: nil, count: items.count)
            for await (index, input) in group { collected[index] = input }
            return collected.compactMap { $0 }
        }
    }

    /// What the ledger holds of `environment` (the verifier's: every verified payload is of it)
    /// for a page's verified notifications.
    static func snapshot(
        for inputs: [RecoveryPlanner.Input], pair: AppStorePair, store: LedgerStore
    ) async throws -> RecoveryPlanner.LedgerSnapshot {
        let keys = Keys(inputs)
        // pageState looks each key up once, duplicates aside.
        let state = try await store.pageState(
            pair: pair, notifications: keys.notifications, customers: keys.customers, transactions: keys.transactions)
        return snapshot(of: state)
    }

    /// What a page's verified notifications are looked up by.
    struct Keys {
        var notifications: [UUID]
        var customers: [String]
        var transactions: [String]

        init(_ inputs: [RecoveryPlanner.Input]) {
            let verified = inputs.compactMap { $0.outcome.verifiedPayload }
            notifications = verified.compactMap { UUID(uuidString: $0.payload.notificationUUID) }
            customers = verified.compactMap { $0.transaction?.originalTransactionId ?? $0.renewalInfo?.originalTransactionId }
            transactions = verified.compactMap { $0.transaction?.transactionId }
        }
    }

    /// Reads, plans and writes a page with its customers locked (`LedgerStore.applyLocked`):
    /// `plan` decides from what the ledger holds inside that transaction.
    static func applyLocked<Planned: Sendable>(
        _ inputs: [RecoveryPlanner.Input], pair: AppStorePair, store: LedgerStore, runId: UUID?,
        checkpoint: (QueryCheckpoint, CheckpointScope)? = nil, commitBy: ContinuousClock.Instant? = nil,
        plan: (RecoveryPlanner.LedgerSnapshot) throws -> (LedgerBatch, Planned)
    ) async throws -> (LedgerBatchOutcome, Planned) {
        let keys = Keys(inputs)
        return try await store.applyLocked(
            pair: pair, notifications: keys.notifications, customers: keys.customers, transactions: keys.transactions,
            runId: runId, checkpoint: checkpoint, commitBy: commitBy
        ) { state in try plan(snapshot(of: state)) }
    }

    static func snapshot(of state: PageLedgerState) -> RecoveryPlanner.LedgerSnapshot {
        var snapshot = RecoveryPlanner.LedgerSnapshot()
        snapshot.existingNotifications = state.existingNotifications
        snapshot.subscriptions = state.subscriptions
        snapshot.transactionSignedDates = state.transactionSignedDates
        return snapshot
    }
}
