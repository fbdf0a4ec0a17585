package import AppStoreServerModel
package import Foundation
package import LedgerModel
package import SignedData

/// Decides, for one page of notification history, what happens to each notification: a pure
/// value computed from the verification outcomes, the rows the ledger holds, and what this run
/// has already decided. The same plan is printed by a dry run and written by a real one.
package struct RecoveryPlanner: Sendable {
    /// One history item and its verification outcome.
    package struct Input: Sendable {
        package var item: NotificationHistoryItem
        package var outcome: VerificationOutcome<VerifiedNotification>
        /// For a payload not verified, what its content names (read once, capped, where it was
        /// verified: in `serve`, the request's own task, not the shared batch writer).
        package var unverifiedNames: UnverifiedPayload.NotificationNames?

        package init(item: NotificationHistoryItem, outcome: VerificationOutcome<VerifiedNotification>) {
            self.item = item
            self.outcome = outcome
            if outcome.verifiedPayload == nil { unverifiedNames = UnverifiedPayload.names(ofNotification: item.signedPayload) }
        }
    }

    /// What the ledger held for the page's notifications, read in one round of queries.
    package struct LedgerSnapshot: Sendable {
        package var existingNotifications: Set<UUID> = []
        package var subscriptions: [String: SubscriptionRecord] = [:]
        package var transactionSignedDates: [String: Date] = [:]
        package init() {}
    }

    package enum Action: String, Sendable, Hashable, Codable {
        /// Already in the ledger (by notificationUUID): skipped.
        case alreadyRecorded = "already-recorded"
        /// Missed, and applied: recorded, its transaction and subscription updated (or, signed
        /// before the subscription's row, only the row's renewal fields, from renewal info newer
        /// than the row's).
        case applied
        /// Missed, and recorded, but signed before the state the ledger holds: changes nothing.
        case stale
        /// Failed verification: never applied.
        case rejected
        /// Could not be verified now: tried again at the end of the run.
        case retryLater = "retry-later"
    }

    package struct Decision: Sendable, Hashable {
        package var notificationUUID: String?
        package var notificationType: String?
        package var subtype: String?
        package var signedDate: Date?
        package var originalTransactionId: String?
        package var firstAttemptResult: String?
        package var firstAttemptDate: Date?
        package var action: Action
        package var rejection: Rejection?
        package var retryReason: String?
        /// For a rejected payload, the customer its unverified content names (to repair them).
        package var unverifiedCustomer: String?
    }

    /// What the run has decided so far, so later pages (and a dry run, which writes nothing) see
    /// the ledger as the earlier pages left it.
    package struct RunMemory: Sendable {
        package var appliedNotifications: Set<UUID> = []
        package var subscriptions: [String: SubscriptionRecord] = [:]
        /// The subscription row before the run first changed it (nil: there was none).
        package var subscriptionsBefore: [String: SubscriptionRecord?] = [:]
        /// The transaction rows this run wrote (or, dry, would write), newest version each.
        package var transactions: [String: TransactionRecord] = [:]
        package init() {}

        /// Only what `batch` writes. A real run carries the memory of one page into the next,
        /// whose ledger read may have started before that page was committed.
        package func keeping(only batch: LedgerBatch) -> RunMemory {
            var kept = RunMemory()
            for notification in batch.notifications where appliedNotifications.contains(notification.notificationUUID) {
                kept.appliedNotifications.insert(notification.notificationUUID)
            }
            for transaction in batch.transactions {
                kept.transactions[transaction.transactionId] = transactions[transaction.transactionId]
            }
            for subscription in batch.subscriptions {
                let key = subscription.originalTransactionId
                kept.subscriptions[key] = subscriptions[key]
                kept.subscriptionsBefore[key] = subscriptionsBefore[key]
            }
            return kept
        }
    }

    package struct PagePlan: Sendable {
        package var decisions: [Decision] = []
        package var batch = LedgerBatch(cause: .history)
    }

    /// The order in which `plan` decides `inputs` (and so the order of its decisions): by
    /// `signedDate`, ties and unverified payloads in the order given. As indices into `inputs`.
    package static func order(_ inputs: [Input]) -> [Int] {
        inputs.indices.sorted { lhs, rhs in
            let left = inputs[lhs].outcome.verifiedPayload?.payload.signedDate ?? 0
            let right = inputs[rhs].outcome.verifiedPayload?.payload.signedDate ?? 0
            return left != right ? left < right : lhs < rhs
        }
    }

    /// Plans a page. Notifications are taken in `signedDate` order, so that within the page too
    /// a notification signed earlier never overwrites state from one signed later.
    package static func plan(
        _ inputs: [Input], ledger: LedgerSnapshot, memory: inout RunMemory, source: NotificationRecord.Source = .history
    ) -> PagePlan {
        var plan = PagePlan()
        plan.batch.cause = source == .webhook ? .webhook : .history
        for input in order(inputs).map({ inputs[$0] }) {
            let first = input.item.sendAttempts?.min { $0.attemptDate < $1.attemptDate }
            var decision = Decision(
                // The verified UUID when there is one: reading the payload again costs a JSON decode.
                notificationUUID: input.outcome.verifiedPayload?.payload.notificationUUID ?? input.unverifiedNames?.notificationUUID,
                firstAttemptResult: input.item.firstAttemptResult?.rawValue,
                firstAttemptDate: LedgerMapping.date(first?.attemptDate), action: .rejected
            )
            switch input.outcome {
            case .rejected(let rejection):
                decision.rejection = rejection
                decision.unverifiedCustomer = input.unverifiedNames?.originalTransactionId
                // What Apple's API answered over TLS is kept whole. What anyone can POST (serve,
                // ingest) is kept as a summary, even when Apple's signature is proven (issue 53:
                // Apple's notifications of other apps are anyone's to obtain and send, 13.5 KB a
                // row), and a proven one once, however its signature's bytes were re-made.
                plan.batch.rejected.append(
                    RejectedPayloadRecord(
                        source: source.rawValue, notificationUUID: decision.notificationUUID, reason: rejection.reason.rawValue,
                        detail: rejection.detail, signedPayload: input.item.signedPayload, keptWhole: source != .webhook,
                        unverifiedOriginalTransactionId: decision.unverifiedCustomer,
                        digestOfSigningInput: source == .webhook && rejection.reason.provesItsSigner
                    )
                )
            case .retryLater(let reason):
                decision.action = .retryLater
                decision.retryReason = reason
            case .verified(let notification):
                let payload = notification.payload
                decision.notificationType = payload.notificationType.rawValue
                decision.subtype = payload.subtype?.rawValue
                decision.signedDate = LedgerMapping.date(payload.signedDate)
                decision.originalTransactionId = notification.transaction?.originalTransactionId ?? notification.renewalInfo?.originalTransactionId
                guard let uuid = UUID(uuidString: payload.notificationUUID) else {
                    decision.rejection = Rejection(.malformed, "notificationUUID '\(payload.notificationUUID.prefix(40))' is not a UUID")
                    plan.batch.rejected.append(
                        RejectedPayloadRecord(
                            source: source.rawValue, notificationUUID: decision.notificationUUID, reason: RejectionReason.malformed.rawValue,
                            detail: decision.rejection!.detail, signedPayload: input.item.signedPayload
                        )
                    )
                    break
                }
                if ledger.existingNotifications.contains(uuid) || memory.appliedNotifications.contains(uuid) {
                    decision.action = .alreadyRecorded
                    break
                }
                memory.appliedNotifications.insert(uuid)
                let record = LedgerMapping.notificationRecord(notification, signedPayload: input.item.signedPayload, source: source, uuid: uuid)
                plan.batch.notifications.append(record)
                if let request = LedgerMapping.consumptionRequest(notification, record: record, firstAttempt: decision.firstAttemptDate) {
                    plan.batch.consumptionRequests.append(request)
                }
                decision.action = apply(notification, uuid: uuid, ledger: ledger, memory: &memory, batch: &plan.batch)
            }
            plan.decisions.append(decision)
        }
        return plan
    }

    /// Adds the transaction and subscription changes of a missed notification; applied or stale.
    static func apply(
        _ notification: VerifiedNotification, uuid: UUID, ledger: LedgerSnapshot, memory: inout RunMemory, batch: inout LedgerBatch
    ) -> Action {
        if let transaction = notification.transaction, let signed = notification.payload.data?.signedTransactionInfo,
            let record = LedgerMapping.transactionRecord(transaction, signed: signed, fallbackSignedDate: notification.payload.signedDate)
        {
            let stored = [ledger.transactionSignedDates[record.transactionId], memory.transactions[record.transactionId]?.signedDate]
                .compactMap { $0 }.max()
            if stored.map({ $0.unixMilliseconds < record.signedDate.unixMilliseconds }) ?? true {
                // The run remembers the row without its JWS: the comparisons need the fields, and
                // a window's worth of signed transactions would make memory grow with the window.
                var remembered = record
                remembered.signedTransaction = ""
                memory.transactions[record.transactionId] = remembered
                batch.transactions.removeAll { $0.transactionId == record.transactionId }
                batch.transactions.append(record)
                batch.transactionNotifications[record.transactionId] = uuid
            }
        }
        let key = notification.transaction?.originalTransactionId ?? notification.renewalInfo?.originalTransactionId
        guard let key else { return .applied }
        let current = newer(ledger.subscriptions[key], memory.subscriptions[key])
        guard var candidate = LedgerMapping.subscriptionRecord(notification, current: current) else { return .applied }
        if let current, current.lastSignedDate.unixMilliseconds >= candidate.lastSignedDate.unixMilliseconds {
            // Older than the row, but its renewal info may be newer than the row's.
            guard let merged = LedgerMapping.renewalMerged(notification, into: current) else { return .stale }
            candidate = merged
        }
        if memory.subscriptionsBefore[key] == nil { memory.subscriptionsBefore[key] = .some(ledger.subscriptions[key]) }
        memory.subscriptions[key] = candidate
        batch.subscriptions.removeAll { $0.originalTransactionId == key }
        batch.subscriptions.append(candidate)
        batch.subscriptionNotifications[key] = uuid
        return .applied
    }

    package static func newer(_ lhs: SubscriptionRecord?, _ rhs: SubscriptionRecord?) -> SubscriptionRecord? {
        guard let lhs else { return rhs }
        guard let rhs else { return lhs }
        return rhs.lastSignedDate.unixMilliseconds > lhs.lastSignedDate.unixMilliseconds ? rhs : lhs
    }
}
