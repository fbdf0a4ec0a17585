import AppStoreServerAPI
package import Decisions
import Foundation
package import Ledger
import Logging
package import SignedData

/// Records one live notification (the body Apple POSTs to the webhook) through the same
/// verify-and-apply path as a recovery, with `source = 'webhook'`. This is how a webhook handler
/// in any language hands a notification to the ledger (`appstore-reconcile ingest`), and the call
/// a Swift webhook handler makes.
package struct NotificationIngest: Sendable {
    package enum Outcome: Sendable, Hashable {
        /// New: recorded, and the subscription updated unless it already held newer information.
        case recorded(stale: Bool)
        /// The ledger already had it (Apple's retry of a delivery that did arrive, or a recovery).
        case duplicate
        /// Failed verification: recorded in `app_store.rejected_payloads`, never applied.
        case rejected(Rejection)
        /// Could not be verified now; answer Apple with an error so that it retries.
        case retryLater(String)
    }

    package let verifier: SignedDataVerifier
    package let store: LedgerStore
    /// When set (`serve --forward-to`), each notification recorded is queued in
    /// `app_store.deliveries` for this target, in the statement that records it.
    package let deliverTo: String?

    package init(verifier: SignedDataVerifier, store: LedgerStore, deliverTo: String? = nil) {
        self.verifier = verifier
        self.store = store
        self.deliverTo = deliverTo
    }

    /// Records many live notifications at once (a backlog a webhook handler queued, or the demo
    /// replaying what a live server received): verified in parallel, compared with one round of
    /// queries, written in one database transaction. Returns how many were new.
    @discardableResult
    package func ingest(signedPayloads: [String]) async throws -> Int {
        let inputs = await PageInputs.verify(signedPayloads.map { NotificationHistoryItem(signedPayload: $0, sendAttempts: nil) }, with: verifier)
        return try await ingest(verified: inputs).filter { if case .recorded = $0 { true } else { false } }.count
    }

    package func ingest(signedPayload: String) async throws -> Outcome {
        try await ingest(verified: [await verify(signedPayload)])[0]
    }

    /// One payload verified: the first half of `ingest`, which needs no database.
    package func verify(_ signedPayload: String) async -> RecoveryPlanner.Input {
        let item = NotificationHistoryItem(signedPayload: signedPayload, sendAttempts: nil)
        return RecoveryPlanner.Input(item: item, outcome: await verifier.verifyNotification(signedPayload))
    }

    /// The second half: payloads already verified, recorded in one database transaction; the
    /// outcome of each, in the order given. With `commitBy`, nothing is written when the
    /// statements end after it (`LedgerStore.CommitDeadlinePassed`).
    package func ingest(verified inputs: [RecoveryPlanner.Input], commitBy: ContinuousClock.Instant? = nil) async throws -> [Outcome] {
        let deliverTo = self.deliverTo
        let (written, plan) = try await PageInputs.applyLocked(
            inputs, pair: verifier.configuration.pair, store: store, runId: nil, commitBy: commitBy
        ) { snapshot in
            var memory = RecoveryPlanner.RunMemory()
            var plan = RecoveryPlanner.plan(inputs, ledger: snapshot, memory: &memory, source: .webhook)
            plan.batch.deliverTo = deliverTo
            return (plan.batch, plan)
        }
        var outcomes = [Outcome](repeating: .duplicate, count: inputs.count)
        for (decision, index) in zip(plan.decisions, RecoveryPlanner.order(inputs)) {
            switch RecoveryPlanner.settle(decision, batch: plan.batch, written: written) {
            case .rejected: outcomes[index] = .rejected(decision.rejection ?? Rejection(.malformed, "unreadable"))
            case .retryLater: outcomes[index] = .retryLater(decision.retryReason ?? "")
            case .alreadyRecorded: outcomes[index] = .duplicate
            case .applied: outcomes[index] = .recorded(stale: false)
            case .stale: outcomes[index] = .recorded(stale: true)
            }
        }
        return outcomes
    }
}
