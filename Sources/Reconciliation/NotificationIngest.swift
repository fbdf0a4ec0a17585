import AppStoreServerAPI
import Foundation
import Ledger
import Logging
import SignedData

/// Records one live notification (the body Apple POSTs to the webhook) through the same
/// verify-and-apply path as a recovery, with `source = 'webhook'`. This is how a webhook handler
/// in any language hands a notification to the ledger (`appstore-reconcile ingest`), and the call
/// a Swift webhook handler makes.
public struct NotificationIngest: Sendable {
    public enum Outcome: Sendable, Hashable {
        /// New: recorded, and the subscription updated unless it already held newer information.
        case recorded(stale: Bool)
        /// The ledger already had it (Apple's retry of a delivery that did arrive, or a recovery).
        case duplicate
        /// Failed verification: recorded in `app_store.rejected_payloads`, never applied.
        case rejected(Rejection)
        /// Could not be verified now; answer Apple with an error so that it retries.
        case retryLater(String)
    }

    public let verifier: SignedDataVerifier
    public let store: LedgerStore

    public init(verifier: SignedDataVerifier, store: LedgerStore) {
        self.verifier = verifier
        self.store = store
    }

    public func ingest(signedPayload: String) async throws -> Outcome {
        let item = NotificationHistoryItem(signedPayload: signedPayload, sendAttempts: nil)
        let input = RecoveryPlanner.Input(item: item, outcome: await verifier.verifyNotification(signedPayload))
        var snapshot = RecoveryPlanner.LedgerSnapshot()
        if let verified = input.outcome.verifiedPayload {
            snapshot.existingNotifications = try await store.existingNotifications(UUID(uuidString: verified.payload.notificationUUID).map { [$0] } ?? [])
            if let customer = verified.transaction?.originalTransactionId ?? verified.renewalInfo?.originalTransactionId {
                snapshot.subscriptions = try await store.subscriptions([customer])
            }
            snapshot.transactionSignedDates = try await store.transactionSignedDates(verified.transaction?.transactionId.map { [$0] } ?? [])
        }
        var memory = RecoveryPlanner.RunMemory()
        let plan = RecoveryPlanner.plan([input], ledger: snapshot, memory: &memory, source: .webhook)
        let outcome = try await store.apply(plan.batch, runId: nil)
        guard let decision = plan.decisions.first else { return .duplicate }
        switch decision.action {
        case .rejected: return .rejected(decision.rejection ?? Rejection(.malformed, "unreadable"))
        case .retryLater: return .retryLater(decision.retryReason ?? "")
        case .alreadyRecorded: return .duplicate
        case .applied, .stale:
            guard let uuid = decision.notificationUUID.flatMap(UUID.init(uuidString:)), outcome.insertedNotifications.contains(uuid) else {
                return .duplicate
            }
            let changed = decision.originalTransactionId.map { outcome.changedSubscriptions.contains($0) } ?? true
            return .recorded(stale: decision.action == .stale || (!changed && !plan.batch.subscriptions.isEmpty))
        }
    }
}
