import AppStoreServerAPI
import Foundation
import Ledger
import Logging
import SignedData

/// Pass 2: repairs customers whose record may still be wrong, with Apple's truth. For each: Get
/// Transaction History (ascending, from the stored revision: only what changed since), every
/// transaction verified, Get All Subscription Statuses for the subscription's state, the rows
/// recomputed, and the final revision stored in the same database transaction as what it
/// covers (never in a dry run). Customers are repaired in parallel, bounded, under the client's
/// shared rate limiter.
public struct CustomerRepair: Sendable {
    public struct Target: Sendable, Hashable {
        public var customer: String
        /// The transaction ID to ask Apple with (any of the customer's; the original one by default).
        public var transactionId: String
        public var reasons: [GapReason]

        public init(customer: String, transactionId: String? = nil, reasons: [GapReason]) {
            self.customer = customer
            self.transactionId = transactionId ?? customer
            self.reasons = reasons
        }
    }

    public let client: AppStoreServerAPIClient
    public let verifier: SignedDataVerifier
    public let store: LedgerStore
    public let logger: Logger
    public let progress: ProgressLine
    public let concurrency: Int
    public let stop: StopRequest

    public init(
        client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, logger: Logger,
        progress: ProgressLine = ProgressLine(enabled: false), concurrency: Int = 8, stop: StopRequest = StopRequest()
    ) {
        self.stop = stop
        self.client = client
        self.verifier = verifier
        self.store = store
        self.logger = logger
        self.progress = progress
        self.concurrency = max(1, concurrency)
    }

    // MARK: Who

    /// Customers the rules find, streamed through the ledger a chunk at a time.
    public func scanLedger(now: Date = Date(), chunk: Int = 500, _ found: (Target) async throws -> Void) async throws {
        var cursor: String?
        while true {
            let views = try await store.customerViews(after: cursor, limit: chunk)
            guard let last = views.last else { return }
            cursor = last.originalTransactionId
            for view in views {
                let reasons = GapRules.evaluate(view, now: now)
                if !reasons.isEmpty { try await found(Target(customer: view.originalTransactionId, reasons: reasons)) }
            }
        }
    }

    /// The customers a recovery run points at: those whose notifications it recovered (or found
    /// stale) or that were recovered in the window before, and those with payloads rejected.
    public func targets(after recovery: RecoveryReport, window: OutageWindow) async throws -> [Target] {
        var reasons: [String: [GapReason]] = [:]
        for entry in recovery.missed {
            if let customer = entry.originalTransactionId { reasons[customer, default: []].append(.recoveredInWindow) }
        }
        for customer in try await store.customersRecovered(from: window.start, to: window.end) {
            reasons[customer, default: []].append(.recoveredInWindow)
        }
        for rejected in recovery.rejected {
            if let customer = rejected.originalTransactionId { reasons[customer, default: []].append(.payloadRejected) }
        }
        return reasons.sorted { $0.key < $1.key }.map { Target(customer: $0.key, reasons: Array(Set($0.value)).sorted { $0.rawValue < $1.rawValue }) }
    }

    // MARK: Repair

    /// Repairs the targets, `concurrency` at a time, and returns what happened to each.
    /// - Parameter overlay: what pass 1 wrote or would write, for a dry run to compare against.
    public func repair(_ targets: [Target], dryRun: Bool, overlay: RecoveryReport.LedgerOverlay = .init()) async throws -> [RecoveryReport.Repair] {
        var results: [RecoveryReport.Repair] = []
        var index = 0
        try await withThrowingTaskGroup(of: RecoveryReport.Repair.self) { group in
            func startNext() {
                guard index < targets.count, !stop.isRequested else { return }
                let target = targets[index]
                index += 1
                group.addTask { try await repairOne(target, dryRun: dryRun, overlay: overlay) }
            }
            for _ in 0..<concurrency { startNext() }
            while let result = try await group.next() {
                results.append(result)
                progress.update(
                    "repairs \(results.count)/\(targets.count) · changed \(results.filter { $0.outcome == "repaired" }.count)",
                    requests: client.counts.requests.values.reduce(0, +)
                )
                startNext()
            }
        }
        // Customers in hand were finished and committed; the rest wait for the next run.
        try stop.check()
        return results.sorted { $0.originalTransactionId < $1.originalTransactionId }
    }

    func repairOne(_ target: Target, dryRun: Bool, overlay: RecoveryReport.LedgerOverlay) async throws -> RecoveryReport.Repair {
        var entry = RecoveryReport.Repair(originalTransactionId: target.customer, reasons: target.reasons.map(\.rawValue))
        let stored = try await store.revision(of: target.customer)
        var pages: [HistoryResponse] = []
        var startedOver = false
        do {
            pages = try await fetch(target.transactionId, from: stored)
        } catch let error as AppStoreAPIError where error.code == .invalidRequestRevision {
            // Apple no longer accepts the stored revision: forget it and fetch everything.
            startedOver = true
            pages = try await fetch(target.transactionId, from: nil)
        } catch let error as AppStoreAPIError where error.code == .transactionIdNotFound {
            entry.outcome = "not-found"
            return entry
        }
        entry.transactionHistoryRequests = pages.count
        var batch = LedgerBatch()
        // Each transaction's newest version: ascending by modification, so the last one seen.
        var latest: [String: (payload: TransactionPayload, signed: String)] = [:]
        var order: [String] = []
        for page in pages {
            for (signed, outcome) in await verifyAll(page.signedTransactions) {
                switch outcome {
                case .verified(let transaction):
                    guard let id = transaction.transactionId else { continue }
                    if latest[id] == nil { order.append(id) }
                    latest[id] = (transaction, signed)
                case .rejected(let rejection):
                    entry.rejected += 1
                    batch.rejected.append(
                        RejectedPayloadRecord(source: "transaction-history", notificationUUID: nil, reason: rejection.reason.rawValue, detail: rejection.detail, signedPayload: signed)
                    )
                case .retryLater:
                    entry.rejected += 1
                }
            }
        }
        // A named transaction the ledger did not know was taken for the customer's key; Apple's
        // answer says whose it is.
        let customer = latest.values.first?.payload.originalTransactionId ?? target.customer
        entry.originalTransactionId = customer
        var target = target
        target.customer = customer
        let storedSubscription = RecoveryPlanner.newer(
            try await store.subscriptions([target.customer])[target.customer], overlay.subscriptions[target.customer]
        )
        var truthSubscription: SubscriptionRecord?
        let isSubscription = storedSubscription != nil || latest.values.contains { $0.payload.type == .autoRenewable }
        if isSubscription {
            truthSubscription = try await subscriptionTruth(target)
        }
        let plan = RepairPlanner.plan(
            customer: target.customer, truth: .init(transactions: order.compactMap { latest[$0] }, subscription: truthSubscription),
            storedTransactions: Self.merge(try await store.transactions(ofCustomer: target.customer), overlay, customer: target.customer),
            storedSubscription: storedSubscription
        )
        entry.transactionsAdded = plan.transactionsAdded
        entry.transactionsChanged = plan.transactionsChanged
        entry.refundsFound = plan.refundsFound
        entry.changes = plan.changes
        entry.outcome = plan.batch.transactions.isEmpty && plan.batch.subscriptions.isEmpty ? "unchanged" : "repaired"
        if !dryRun {
            batch.transactions = plan.batch.transactions
            batch.subscriptions = plan.batch.subscriptions
            if let final = pages.last?.finalRevision { batch.revisions[target.customer] = final }
            if startedOver && batch.revisions[target.customer] == nil { batch.revisionsToForget.append(target.customer) }
            _ = try await store.apply(batch, runId: nil)
        }
        return entry
    }

    /// The stored transactions with pass 1's (planned) versions on top.
    static func merge(_ stored: [TransactionRecord], _ overlay: RecoveryReport.LedgerOverlay, customer: String) -> [TransactionRecord] {
        var byId = Dictionary(stored.map { ($0.transactionId, $0) }, uniquingKeysWith: { first, _ in first })
        for record in overlay.transactions.values where record.originalTransactionId == customer {
            if byId[record.transactionId].map({ $0.signedDate.unixMilliseconds < record.signedDate.unixMilliseconds }) ?? true {
                byId[record.transactionId] = record
            }
        }
        return Array(byId.values)
    }

    private func fetch(_ transactionId: String, from revision: String?) async throws -> [HistoryResponse] {
        var pages: [HistoryResponse] = []
        for try await page in client.transactionHistory(transactionId: transactionId, startingAt: revision) { pages.append(page) }
        return pages
    }

    private func verifyAll(_ signed: [String]) async -> [(String, VerificationOutcome<TransactionPayload>)] {
        let verifier = self.verifier
        return await withTaskGroup(of: (Int, String, VerificationOutcome<TransactionPayload>).self) { group in
            for (index, jws) in signed.enumerated() {
                group.addTask { (index, jws, await verifier.verifyTransaction(jws)) }
            }
            var results: [(Int, String, VerificationOutcome<TransactionPayload>)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
        }
    }

    /// The subscription's present state from Get All Subscription Statuses, verified.
    private func subscriptionTruth(_ target: Target) async throws -> SubscriptionRecord? {
        let statuses: StatusResponse
        do {
            statuses = try await client.allSubscriptionStatuses(transactionId: target.transactionId)
        } catch let error as AppStoreAPIError where error.code == .transactionIdNotFound {
            return nil
        }
        for group in statuses.data {
            for last in group.lastTransactions where last.originalTransactionId == target.customer {
                guard let signedTransaction = last.signedTransactionInfo,
                    let transaction = await verifier.verifyTransaction(signedTransaction).verifiedPayload
                else { return nil }
                var renewal: RenewalInfoPayload?
                if let signedRenewal = last.signedRenewalInfo, !signedRenewal.isEmpty {
                    guard let verified = await verifier.verifyRenewalInfo(signedRenewal).verifiedPayload else { return nil }
                    renewal = verified
                }
                return RepairPlanner.subscriptionRecord(status: last.status, transaction: transaction, renewal: renewal)
            }
        }
        return nil
    }
}

extension CustomerRepair {
    /// Pass 2 of a run: the customers the recovery points at, then every customer the rules
    /// find in the ledger, each repaired once.
    public func afterRecovery(_ recovery: RecoveryReport, window: OutageWindow, dryRun: Bool, shard: Shard = .whole) async throws -> [RecoveryReport.Repair] {
        var targets: [String: Target] = [:]
        for target in try await self.targets(after: recovery, window: window) where shard.owns(customer: target.customer) {
            targets[target.customer] = target
        }
        try await scanLedger { target in
            guard shard.owns(customer: target.customer) else { return }
            if var existing = targets[target.customer] {
                existing.reasons = Array(Set(existing.reasons + target.reasons)).sorted { $0.rawValue < $1.rawValue }
                targets[target.customer] = existing
            } else {
                targets[target.customer] = target
            }
        }
        // Only a dry run needs pass 1's overlay: a real run's pass 1 is in the ledger already.
        return try await repair(targets.values.sorted { $0.customer < $1.customer }, dryRun: dryRun, overlay: dryRun ? recovery.pass1 : .init())
    }
}
