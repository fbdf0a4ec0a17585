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
        try await scan(now: now, chunk: chunk, more: { _ in [:] }, found)
    }

    /// Streams through every customer with a subscription row, in order: the gap rules' reasons,
    /// and `more`'s for the chunk (read once per chunk), decide who is a target.
    func scan(
        now: Date = Date(), chunk: Int = 500, more: ([String]) async throws -> [String: Set<GapReason>], _ found: (Target) async throws -> Void
    ) async throws {
        var cursor: String?
        while true {
            let views = try await store.customerViews(after: cursor, limit: chunk)
            guard let last = views.last else { return }
            cursor = last.originalTransactionId
            let extra = try await more(views.map(\.originalTransactionId))
            for view in views {
                let reasons = Set(GapRules.evaluate(view, now: now)).union(extra[view.originalTransactionId] ?? [])
                if !reasons.isEmpty { try await found(Target(customer: view.originalTransactionId, reasons: Self.ordered(reasons))) }
            }
        }
    }

    static func ordered(_ reasons: Set<GapReason>) -> [GapReason] { reasons.sorted { $0.rawValue < $1.rawValue } }

    // MARK: Repair

    /// How many finished repairs may wait for an earlier, slower one before no new one starts:
    /// results are reported in the order of their targets, with memory bounded.
    static let reorderLimit = 256

    /// Repairs the targets, `concurrency` at a time, and returns what happened to each.
    /// - Parameter overlay: what pass 1 wrote or would write, for a dry run to compare against.
    public func repair(_ targets: [Target], dryRun: Bool, overlay: RecoveryReport.LedgerOverlay = .init()) async throws -> ReportList<RecoveryReport.Repair> {
        try await repair(dryRun: dryRun, overlay: overlay) { emit in
            for target in targets { try await emit(target) }
        }
    }

    /// Repairs the targets `produce` hands over as it finds them (a scan of the ledger), in
    /// parallel, `concurrency` at a time, and lists the results in the order of the targets.
    /// Neither the targets nor the results are held in memory: a scan of a million customers
    /// takes the memory of one chunk and `reorderLimit` results.
    public func repair(
        dryRun: Bool, overlay: RecoveryReport.LedgerOverlay = .init(), produce: (_ emit: (Target) async throws -> Void) async throws -> Void
    ) async throws -> ReportList<RecoveryReport.Repair> {
        let results = try ReportList<RecoveryReport.Repair>()
        var changed = 0
        try await withThrowingTaskGroup(of: (Int, RecoveryReport.Repair).self) { group in
            var started = 0
            var inFlight = 0
            var finished: [Int: RecoveryReport.Repair] = [:]
            func collectOne() async throws {
                guard let (index, result) = try await group.next() else { return }
                inFlight -= 1
                finished[index] = result
                while let next = finished.removeValue(forKey: results.count) {
                    results.append(next)
                    if next.outcome == "repaired" { changed += 1 }
                }
                progress.update(
                    "repairs \(results.count) · changed \(changed) · in hand \(inFlight + finished.count)",
                    requests: client.counts.requests.values.reduce(0, +)
                )
            }
            do {
                try await produce { target in
                    if stop.isRequested { throw StopProducing() }
                    while inFlight >= concurrency || finished.count >= Self.reorderLimit { try await collectOne() }
                    let index = started
                    started += 1
                    inFlight += 1
                    group.addTask { (index, try await repairOne(target, dryRun: dryRun, overlay: overlay)) }
                }
            } catch is StopProducing {}
            while inFlight > 0 { try await collectOne() }
        }
        // Customers in hand were finished and committed; the rest wait for the next run.
        try stop.check()
        return results
    }

    private struct StopProducing: Error {}

    func repairOne(_ target: Target, dryRun: Bool, overlay: RecoveryReport.LedgerOverlay) async throws -> RecoveryReport.Repair {
        var entry = RecoveryReport.Repair(originalTransactionId: target.customer, reasons: target.reasons.map(\.rawValue))
        // The stored revision and rows, in one lease; the rows' writes below are guarded by
        // signedDate in SQL, so a live write between this read and them is never undone.
        var state = try await store.customerState(target.customer)
        let stored = state.revision
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
        if customer != target.customer {
            target.customer = customer
            state = try await store.customerState(customer)
        }
        let storedSubscription = RecoveryPlanner.newer(state.subscription, overlay.subscriptions[target.customer])
        var truthSubscription: SubscriptionRecord?
        let isSubscription = storedSubscription != nil || latest.values.contains { $0.payload.type == .autoRenewable }
        if isSubscription {
            truthSubscription = try await subscriptionTruth(target)
        }
        let plan = RepairPlanner.plan(
            customer: target.customer, truth: .init(transactions: order.compactMap { latest[$0] }, subscription: truthSubscription),
            storedTransactions: Self.merge(state.transactions, overlay, customer: target.customer),
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
    /// Pass 2 of a run: every customer the gap rules find in the ledger, those whose
    /// notifications the recovery recovered (or found stale), or that were recovered in the
    /// window before, and those named in rejected payloads; each repaired once. Streams through
    /// the ledger: only the customers named outside it (rejections; in a dry run, the missed
    /// notifications it did not write) are held in memory.
    public func afterRecovery(
        _ recovery: RecoveryReport, window: OutageWindow, dryRun: Bool, shard: Shard = .whole, now: Date = Date()
    ) async throws -> ReportList<RecoveryReport.Repair> {
        var named: [String: Set<GapReason>] = [:]
        for rejected in recovery.rejected {
            if let customer = rejected.originalTransactionId, shard.owns(customer: customer) { named[customer, default: []].insert(.payloadRejected) }
        }
        if dryRun {
            for entry in recovery.missed {
                if let customer = entry.originalTransactionId, shard.owns(customer: customer) { named[customer, default: []].insert(.recoveredInWindow) }
            }
        }
        // A real run's recoveries are in the ledger: recorded since the run started.
        let runId = dryRun ? nil : UUID(uuidString: recovery.run.id)
        let store = self.store
        // Only a dry run needs pass 1's overlay: a real run's pass 1 is in the ledger already.
        return try await repair(dryRun: dryRun, overlay: dryRun ? recovery.pass1 : .init()) { emit in
            try await scan(
                now: now,
                more: { customers in
                    var extra: [String: Set<GapReason>] = [:]
                    for customer in try await store.recoveredCustomers(among: customers, from: window.start, to: window.end, sinceRun: runId) {
                        extra[customer, default: []].insert(.recoveredInWindow)
                    }
                    for customer in customers {
                        if let reasons = named.removeValue(forKey: customer) { extra[customer, default: []].formUnion(reasons) }
                    }
                    return extra
                },
                { target in if shard.owns(customer: target.customer) { try await emit(target) } }
            )
            // Recovered customers without a subscription row (one-time purchases).
            var cursor: String?
            while true {
                let customers = try await store.customersRecoveredWithoutSubscription(
                    from: window.start, to: window.end, sinceRun: runId, after: cursor, limit: 500
                )
                guard let last = customers.last else { break }
                cursor = last
                for customer in customers where shard.owns(customer: customer) {
                    let reasons = named.removeValue(forKey: customer, default: []).union([.recoveredInWindow])
                    try await emit(Target(customer: customer, reasons: Self.ordered(reasons)))
                }
            }
            // Named customers the ledger does not know.
            for (customer, reasons) in named.sorted(by: { $0.key < $1.key }) {
                try await emit(Target(customer: customer, reasons: Self.ordered(reasons)))
            }
        }
    }
}

extension Dictionary {
    fileprivate mutating func removeValue(forKey key: Key, default value: Value) -> Value {
        removeValue(forKey: key) ?? value
    }
}
