package import AppStoreServerAPI
package import Decisions
package import Foundation
package import Ledger
import LedgerModel
package import Logging
package import SignedData
import Synchronization

/// Pass 2: repairs, with Apple's truth, the Apple accounts whose records may still be wrong.
///
/// Get Transaction History and Get All Subscription Statuses answer for a customer's whole
/// Apple Account in the app: every originalTransactionId it has. So pass 2 works per account:
/// it asks once per account, with any of its transaction IDs; one Get All Subscription Statuses
/// call gives every subscription's state (each entry applied to its own originalTransactionId),
/// and Get Transaction History, from the account's stored revision (ascending: only what changed
/// since), is asked only where one-time purchases, refunds or missing transactions need checking.
/// Every answer is verified; rows whose content equals Apple's are neither written nor counted
/// (Apple signs its answers when it answers, so signatures always differ); what differs, the
/// account's members, its revision and the time of this verification are committed in one
/// database transaction (never in a dry run). Accounts are repaired in parallel, bounded, under
/// the client's shared rate limiter. One account Apple cannot answer for is reported with its
/// reason and the others go on.
package struct CustomerRepair: Sendable {
    package typealias Target = AccountRepairMachine.Target

    package let client: AppStoreServerAPIClient
    package let verifier: SignedDataVerifier
    package let store: LedgerStore
    package let logger: Logger
    package let progress: any RunProgress
    package let concurrency: Int
    package let stop: StopRequest
    /// How long past its due time a notification Apple owes selects its account (`Overdue`).
    package var overdueAfter: TimeInterval = GapRules.defaultOverdueAfter

    package init(
        client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, logger: Logger,
        progress: any RunProgress = NoProgress(), concurrency: Int = 8, stop: StopRequest = StopRequest()
    ) {
        self.stop = stop
        self.client = client
        self.verifier = verifier
        self.store = store
        self.logger = logger
        self.progress = progress
        self.concurrency = max(1, concurrency)
    }

    var pair: AppStorePair { verifier.configuration.pair }

    /// Only what Apple issues is sent to it: a transaction ID is a string of digits.
    package static func isWellFormedTransactionId(_ id: String) -> Bool { AccountRepairMachine.isWellFormedTransactionId(id) }

    // MARK: Who

    /// Customers the rules find, streamed through the ledger a chunk at a time.
    package func scanLedger(now: Date = Date(), chunk: Int = 500, _ found: (Target) async throws -> Void) async throws {
        try await scan(now: now, chunk: chunk, more: { _ in [:] }, found)
    }

    /// Streams through every subscription of this environment, in order: the gap rules' reasons,
    /// and `more`'s for the chunk (read once per chunk), decide who is a target.
    /// - Parameter seen: the view the rules judge for the ledger's (a dry run's: with what pass 1 would write).
    func scan(
        now: Date = Date(), chunk: Int = 500, seen: (CustomerLedgerView) -> CustomerLedgerView = { $0 },
        more: ([String]) async throws -> [String: (reasons: Set<GapReason>, needsHistory: Bool)],
        _ found: (Target) async throws -> Void
    ) async throws {
        var cursor: String?
        while true {
            let views = try await store.customerViews(pair: pair, after: cursor, limit: chunk)
            guard let last = views.last else { return }
            cursor = last.originalTransactionId
            let extra = try await more(views.map(\.originalTransactionId))
            for view in views {
                let ruled = Set(GapRules.evaluate(seen(view), now: now, overdueAfter: overdueAfter))
                let added = extra[view.originalTransactionId]
                let reasons = ruled.union(added?.reasons ?? [])
                guard !reasons.isEmpty else { continue }
                let needsHistory = ruled.contains(where: \.needsTransactionHistory) || (added?.needsHistory ?? false)
                try await found(Target(customer: view.originalTransactionId, reasons: Self.ordered(reasons), needsTransactionHistory: needsHistory))
            }
        }
    }

    static func ordered(_ reasons: Set<GapReason>) -> [GapReason] { reasons.sorted { $0.rawValue < $1.rawValue } }

    // MARK: Repair

    /// How many finished repairs may wait for an earlier, slower one before no new one starts:
    /// results are reported in the order of their targets, with memory bounded.
    static let reorderLimit = 256

    /// Repairs the targets, `concurrency` at a time, and returns what happened to each account.
    /// - Parameter overlay: what pass 1 wrote or would write, for a dry run to compare against.
    /// - Parameter runId: the run pass 2 belongs to, whose record of changes it adds to.
    package func repair(
        _ targets: [Target], dryRun: Bool, overlay: RecoveryReport.LedgerOverlay = .init(), runId: UUID? = nil
    ) async throws -> ReportList<RecoveryReport.Repair> {
        try await repair(dryRun: dryRun, overlay: overlay, runId: runId) { emit in
            for target in targets { try await emit(target) }
        }
    }

    /// Repairs the targets `produce` hands over as it finds them (a scan of the ledger), in
    /// parallel, `concurrency` at a time, and lists the results in the order of the targets.
    /// Neither the targets nor the results are held in memory: a scan of a million customers
    /// takes the memory of one chunk, `reorderLimit` results and a number per account repaired.
    ///
    /// An account whose requests exhausted their retries is reported failed and the pass goes
    /// on; but when `concurrency` accounts (at least 4) in a row fail so, Apple is down, not the
    /// account: the pass stops with that error (a temporary failure; nothing committed is lost).
    ///
    /// - Parameter handled: the accounts checked in this pass (an import, which asks the ledger
    ///   instead, passes one that remembers nothing: its memory stays flat).
    /// - Parameter finished: told of each target as it is done, in the order of the targets, with
    ///   its report entry (nil when its account was checked earlier in the pass); returns the
    ///   entry to report in its place (an import's answer from the app's Sandbox pair).
    /// - Parameter claims: for targets the ledger cannot tell apart before Apple answers (an
    ///   import's lines): of two targets of one account in flight together, the second stops after
    ///   its first history page.
    package func repair(
        dryRun: Bool, overlay: RecoveryReport.LedgerOverlay = .init(), runId: UUID? = nil, handled: Handled = Handled(), claims: AccountClaims? = nil,
        finished: @escaping (_ index: Int, _ entry: RecoveryReport.Repair?) async throws -> RecoveryReport.Repair? = { _, entry in entry },
        produce: (_ emit: (Target) async throws -> Void) async throws -> Void
    ) async throws -> ReportList<RecoveryReport.Repair> {
        let results = try ReportList<RecoveryReport.Repair>()
        var changed = 0
        var exhaustedInARow = 0
        let giveUpAfter = max(4, concurrency)
        try await withThrowingTaskGroup(of: (Int, RepairResult).self) { group in
            var started = 0
            var inFlight = 0
            var done: [Int: RepairResult] = [:]
            var reported = 0
            func collectOne() async throws {
                guard let (index, result) = try await group.next() else { return }
                inFlight -= 1
                if let exhausted = result.exhausted {
                    exhaustedInARow += 1
                    if exhaustedInARow >= giveUpAfter { throw exhausted }
                } else {
                    exhaustedInARow = 0
                }
                done[index] = result
                while let next = done.removeValue(forKey: reported) {
                    claims?.finished(reported)
                    let reportedEntry = try await finished(reported, next.entry)
                    reported += 1
                    guard let entry = reportedEntry else { continue }
                    results.append(entry)
                    if entry.outcome == .repaired { changed += 1 }
                }
                progress.update(
                    "accounts \(results.count) · changed \(changed) · in hand \(inFlight + done.count)",
                    requests: client.counts.requests.values.reduce(0, +)
                )
            }
            do {
                try await produce { target in
                    if stop.isRequested { throw StopProducing() }
                    while inFlight >= concurrency || done.count >= Self.reorderLimit { try await collectOne() }
                    let index = started
                    started += 1
                    inFlight += 1
                    let claim = claims.map { claims in { @Sendable (ids: [String]) in claims.claim(ids, owner: index) } }
                    group.addTask { (index, try await repairOne(target, dryRun: dryRun, overlay: overlay, runId: runId, handled: handled, claim: claim)) }
                }
            } catch is StopProducing {}
            while inFlight > 0 { try await collectOne() }
        }
        // Accounts in hand were finished and committed; the rest wait for the next run.
        try stop.check()
        return results
    }

    private struct StopProducing: Error {}

    /// What repairing one target gave: its report entry (nil when its account was already
    /// repaired in this pass), and the error when Apple did not answer within the retry budget.
    struct RepairResult: Sendable {
        var entry: RecoveryReport.Repair?
        var exhausted: RetriesExhausted?
    }

    /// Repairs one target: executes what the account's machine (`AccountRepairMachine`) asks for,
    /// and hands it each answer.
    func repairOne(
        _ target: Target, dryRun: Bool, overlay: RecoveryReport.LedgerOverlay, runId: UUID?, handled: Handled,
        claim: (@Sendable ([String]) -> Bool)? = nil
    ) async throws -> RepairResult {
        var machine = AccountRepairMachine(target: target, pair: pair, dryRun: dryRun, overlay: overlay)
        var action = machine.start()
        var exhausted: RetriesExhausted?
        while true {
            switch action {
            case .readAccount:
                let state = try await store.accountState(pair: pair, of: target.customer)
                action = machine.accountRead(state, need: handled.claim(state.accountId ?? target.customer, transactionHistory: target.needsTransactionHistory))
            case .skip:
                return RepairResult(entry: nil)
            case .fetchHistory(let revision):
                action = try await asking(&machine, &exhausted) { machine in
                    do {
                        guard let pages = try await history(target.transactionId, from: revision, claim: claim) else { return .skip }
                        return machine.historyAnswered(pages)
                    } catch let error as AppStoreAPIError where error.code == .invalidRequestRevision {
                        return machine.revisionRefused()
                    }
                }
            case .fetchStatuses:
                action = try await asking(&machine, &exhausted) { machine in
                    let statuses = try await client.allSubscriptionStatuses(transactionId: target.transactionId)
                    var entries: [AccountRepairMachine.StatusEntry] = []
                    for group in statuses.data {
                        for last in group.lastTransactions { entries.append(await subscriptionTruth(last)) }
                    }
                    return machine.statusesAnswered(entries)
                }
            case .readRows(let members):
                let more = try await store.rows(of: members, pair: pair)
                action = machine.rowsRead(subscriptions: more.subscriptions, transactions: more.transactions)
            case .claimPlannedWrites(let transactions, let subscriptions, let members):
                handled.claim(members, transactionHistory: target.needsTransactionHistory)
                let first = handled.claimWrites(transactions: transactions, subscriptions: subscriptions)
                action = machine.writesClaimed(transactions: first.transactions, subscriptions: first.subscriptions)
            case .write(let batch, let members):
                handled.claim(members, transactionHistory: target.needsTransactionHistory)
                action = machine.written(try await store.apply(batch, runId: runId))
            case .recordRefusal(let batch):
                _ = try await store.apply(batch, runId: runId)
                action = machine.refusalRecorded()
            case .finish(let entry):
                return RepairResult(entry: entry, exhausted: exhausted)
            }
        }
    }

    /// Asks Apple; its refusals that concern the account and its silence are events of the machine.
    private func asking(
        _ machine: inout AccountRepairMachine, _ exhausted: inout RetriesExhausted?,
        _ ask: (inout AccountRepairMachine) async throws -> AccountRepairMachine.Action
    ) async throws -> AccountRepairMachine.Action {
        do {
            return try await ask(&machine)
        } catch let error as AppStoreAPIError where Self.accountFailures.contains(error.code ?? .generalBadRequest) {
            let description = "\(error.code.map { "\($0)" } ?? "\(error.httpStatus)")\(error.message.map { " (\($0))" } ?? "")"
            return machine.appleRefused(answer: error.code.map { "\($0.rawValue)" }, description: description)
        } catch let error as RetriesExhausted {
            exhausted = error
            return machine.appleSilent(error.description)
        }
    }

    /// Apple's answers that concern the account, not Apple: reported for the account, the pass goes on.
    static let accountFailures: Set<AppStoreAPIError.Code> = [.accountNotFound, .invalidTransactionId, .transactionIdNotFound]

    /// Every page of the account's transaction history from `revision`, each transaction verified.
    /// nil when `claim` refuses the account's first page: another target of the pass has it.
    private func history(
        _ transactionId: String, from revision: String?, claim: (@Sendable ([String]) -> Bool)? = nil
    ) async throws -> [AccountRepairMachine.HistoryPage]? {
        var pages: [AccountRepairMachine.HistoryPage] = []
        for try await page in client.transactionHistory(transactionId: transactionId, startingAt: revision) {
            let transactions = await verifyAll(page.signedTransactions)
            if pages.isEmpty, let claim {
                let ids = transactions.compactMap { item -> String? in
                    guard case .verified(let payload) = item.outcome else { return nil }
                    return payload.transactionId
                }
                if !claim(ids + [transactionId]) { return nil }
            }
            pages.append(.init(transactions: transactions, finalRevision: page.finalRevision))
        }
        return pages
    }

    private func verifyAll(_ signed: [String]) async -> [(signed: String, outcome: VerificationOutcome<TransactionPayload>)] {
        let verifier = self.verifier
        return await withTaskGroup(of: (Int, String, VerificationOutcome<TransactionPayload>).self) { group in
            for (index, jws) in signed.enumerated() {
                group.addTask { (index, jws, await verifier.verifyTransaction(jws)) }
            }
            var results: [(Int, String, VerificationOutcome<TransactionPayload>)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map { (signed: $0.1, outcome: $0.2) }
        }
    }

    /// One subscription's present state from a Get All Subscription Statuses entry, verified:
    /// its row, and its latest transaction with the JWS.
    private func subscriptionTruth(_ last: LastTransaction) async -> AccountRepairMachine.StatusEntry {
        func rejected(_ signed: String, _ reason: String, _ detail: String) -> AccountRepairMachine.StatusEntry {
            .failure(.init(RejectedPayloadRecord(source: "subscription-statuses", notificationUUID: nil, reason: reason, detail: detail, signedPayload: signed)))
        }
        guard let signedTransaction = last.signedTransactionInfo, !signedTransaction.isEmpty else {
            return rejected("", RejectionReason.malformed.rawValue, "a statuses entry without signedTransactionInfo")
        }
        let transaction: TransactionPayload
        switch await verifier.verifyTransaction(signedTransaction) {
        case .verified(let payload): transaction = payload
        case .rejected(let rejection): return rejected(signedTransaction, rejection.reason.rawValue, rejection.detail)
        case .retryLater(let reason): return rejected(signedTransaction, "retry-later", reason)
        }
        var renewal: RenewalInfoPayload?
        if let signedRenewal = last.signedRenewalInfo, !signedRenewal.isEmpty {
            switch await verifier.verifyRenewalInfo(signedRenewal) {
            case .verified(let payload): renewal = payload
            case .rejected(let rejection): return rejected(signedRenewal, rejection.reason.rawValue, rejection.detail)
            case .retryLater(let reason): return rejected(signedRenewal, "retry-later", reason)
            }
        }
        guard let record = RepairPlanner.subscriptionRecord(status: last.status, transaction: transaction, renewal: renewal) else {
            return rejected(signedTransaction, RejectionReason.malformed.rawValue, "a statuses entry without an originalTransactionId or signedDate")
        }
        return .success((record: record, transaction: transaction, signed: signedTransaction))
    }
}

/// The accounts a pass has checked, as numbers (transaction IDs are digits): a few bytes each.
/// A check with the statuses alone does not cover a target that needs the transaction history.
package final class Handled: Sendable {
    private let checked = Mutex<(statuses: Set<UInt64>, transactionHistory: Set<UInt64>)>(([], []))
    private let remembers: Bool

    /// - Parameter remembers: false for a pass that learns what it checked from the ledger (an
    ///   import): nothing is held, every account is asked about.
    package init(remembers: Bool = true) {
        self.remembers = remembers
    }

    /// What is left to ask for `account` (and it is now claimed).
    func claim(_ account: String, transactionHistory: Bool) -> AccountRepairMachine.Need {
        guard remembers, let number = UInt64(account) else { return .everything }
        return checked.withLock { checked in
            let statusesDone = !checked.statuses.insert(number).inserted
            guard transactionHistory else { return statusesDone ? .nothing : .everything }
            let historyDone = !checked.transactionHistory.insert(number).inserted
            return historyDone ? .nothing : statusesDone ? .transactionHistoryOnly : .everything
        }
    }

    /// A dry run's planned writes, each counted by the first repair that plans it.
    private let plannedWrites = Mutex<(transactions: Set<String>, subscriptions: Set<String>)>(([], []))

    /// Of these planned writes, those no repair of the pass planned before (now claimed).
    func claimWrites(transactions: [String], subscriptions: [String]) -> (transactions: Set<String>, subscriptions: Set<String>) {
        plannedWrites.withLock { planned in
            (
                Set(transactions.filter { planned.transactions.insert($0).inserted }),
                Set(subscriptions.filter { planned.subscriptions.insert($0).inserted })
            )
        }
    }

    func claim(_ members: Set<String>, transactionHistory: Bool) {
        guard remembers else { return }
        checked.withLock { checked in
            for member in members {
                guard let number = UInt64(member) else { continue }
                checked.statuses.insert(number)
                if transactionHistory { checked.transactionHistory.insert(number) }
            }
        }
    }
}

extension CustomerRepair {
    /// Pass 2 of a run: the accounts this run's pass 1 recovered notifications of (in a dry run,
    /// those it would have), those the gap rules find for what happened since their last
    /// verification, and those named in rejected payloads that verified data in the ledger
    /// knows; each account repaired once. Streams through the ledger: only the customers named
    /// outside it (rejections; in a dry run, the missed notifications it did not write) are
    /// held in memory.
    package func afterRecovery(
        _ passOne: PassOneResult, window: OutageWindow, dryRun: Bool, shard: Shard = .whole, now: Date = Date()
    ) async throws -> ReportList<RecoveryReport.Repair> {
        let types = NotificationTypePolicy.recoveredTypes
        var named = try await namedBeforeTheScan(passOne, dryRun: dryRun, shard: shard, types: types)
        // A real run's recoveries are in the ledger: signed in the window, or recorded since the
        // run started, and not checked since (what an earlier run of the window that died before
        // its pass 2 recovered is checked now). The ledger also holds what a dry run must count
        // as a real run would: the refund-flow notifications recorded live, and what earlier runs
        // recovered and pass 2 did not check. Each customer's recorded notifications are judged
        // together (`RecoveryEvidence`): only those that leave its rows in doubt select it.
        let runId = dryRun ? nil : passOne.runId
        let store = self.store
        let pair = self.pair
        // Only a dry run needs pass 1's overlay: a real run's pass 1 is in the ledger already.
        let overlay: RecoveryReport.LedgerOverlay = dryRun ? passOne.overlay : .init()
        // A dry run's gap rules judge the ledger as the real run would leave it: with pass 1's rows
        // and the notifications it would record (a real run's are in the ledger).
        let wouldRecord = named.mapValues(\.recovered)
        let overdueAfter = self.overdueAfter
        func ruledAsWritten(_ customer: String, ledger: CustomerLedgerView?) -> Named {
            guard dryRun, let view = overlay.view(of: customer, ledger: ledger, recovered: wouldRecord[customer] ?? []) else { return Named() }
            let ruled = GapRules.evaluate(view, now: now, overdueAfter: overdueAfter)
            return Named(reasons: Set(ruled), needsHistory: ruled.contains(where: \.needsTransactionHistory))
        }
        func adding(_ ruled: Named, to named: Named?) -> Named {
            var named = named ?? Named()
            named.reasons.formUnion(ruled.reasons)
            named.needsHistory = named.needsHistory || ruled.needsHistory
            return named
        }
        return try await repair(dryRun: dryRun, overlay: overlay, runId: runId) { emit in
            try await scan(
                now: now,
                seen: { view in dryRun ? overlay.view(of: view.originalTransactionId, ledger: view, recovered: wouldRecord[view.originalTransactionId] ?? []) ?? view : view },
                more: { customers in
                    var extra: [String: (reasons: Set<GapReason>, needsHistory: Bool)] = [:]
                    let recovered = try await store.recoveredCustomers(
                        among: customers, pair: pair, from: window.start, to: window.end, sinceRun: runId, types: types)
                    for customer in customers {
                        let more = named.removeValue(forKey: customer)
                        let recorded = (recovered[customer] ?? []) + (more?.recovered ?? [])
                        guard let target = Named.judged(more ?? Named(), recorded: recorded, oneTimePurchase: false) else { continue }
                        extra[customer] = (target.reasons, target.needsHistory)
                    }
                    return extra
                },
                { target in if shard.owns(customer: target.customer) { try await emit(target) } }
            )
            // Recovered customers without a subscription row (one-time purchases).
            var cursor: String?
            while true {
                let customers = try await store.customersRecoveredWithoutSubscription(
                    pair: pair, from: window.start, to: window.end, sinceRun: runId, after: cursor, limit: 500, types: types
                )
                guard let last = customers.last else { break }
                cursor = last.customer
                for (customer, recorded) in customers where shard.owns(customer: customer) {
                    let more = named.removeValue(forKey: customer)
                    // In a dry run, pass 1 may be about to write the customer's subscription row.
                    let oneTimePurchase = overlay.subscriptions[customer] == nil
                    let ruled = adding(ruledAsWritten(customer, ledger: nil), to: more)
                    guard let target = Named.judged(ruled, recorded: recorded + (more?.recovered ?? []), oneTimePurchase: oneTimePurchase)
                    else { continue }
                    try await emit(Target(customer: customer, reasons: Self.ordered(target.reasons), needsTransactionHistory: target.needsHistory))
                }
            }
            // Named customers without a subscription row in the ledger.
            for (customer, more) in named.sorted(by: { $0.key < $1.key }) {
                let oneTimePurchase = overlay.subscriptions[customer] == nil
                guard let target = Named.judged(adding(ruledAsWritten(customer, ledger: nil), to: more), recorded: more.recovered, oneTimePurchase: oneTimePurchase)
                else { continue }
                try await emit(Target(customer: customer, reasons: Self.ordered(target.reasons), needsTransactionHistory: target.needsHistory))
            }
        }
    }

    /// The customers pass 2 knows of before the ledger's scan reaches them, in `shard`: named by
    /// a rejected payload, and in a dry run those with notifications pass 1 would record.
    private func namedBeforeTheScan(_ passOne: PassOneResult, dryRun: Bool, shard: Shard, types: RecoveredTypes) async throws -> [String: Named] {
        var named: [String: Named] = [:]
        // A rejected payload's IDs are unverified: Apple is asked only about those that verified
        // data in the ledger already holds, with those IDs.
        let rejectedCustomers = passOne.rejectedCustomers.filter(Self.isWellFormedTransactionId)
        for customer in try await store.knows(originalTransactionIds: Array(rejectedCustomers), pair: pair) where shard.owns(customer: customer) {
            named[customer, default: Named(needsHistory: true)].reasons.insert(.payloadRejected)
        }
        guard dryRun else { return named }
        // What the dry run would record, with the ledger's refund decisions signed after it (a
        // real run finds both in the ledger).
        let owned = passOne.recoveredInDryRun.filter { shard.owns(customer: $0.key) }
        let decided = try await store.latestRefundDecisions(among: owned.keys.sorted(), pair: pair, types: types)
        for (customer, recorded) in owned {
            named[customer, default: Named()].recovered = recorded.map { notification in
                var notification = notification
                notification.decidedLater = (decided[customer].map { $0 > notification.signedDate }) ?? false
                return notification
            }
        }
        return named
    }

    /// A customer pass 2 knows of before the ledger's scan reaches it: named by a rejected
    /// payload, or (in a dry run) with notifications pass 1 would record.
    struct Named {
        var reasons: Set<GapReason> = []
        var needsHistory = false
        var recovered: [RecoveredNotification] = []

        /// With what `recorded` calls for added (`recovered-in-window` when it leaves the rows in
        /// doubt), or nil when nothing selects the customer.
        static func judged(_ named: Named, recorded: [RecoveredNotification], oneTimePurchase: Bool) -> Named? {
            var named = named
            if let question = RecoveryEvidence.question(recorded, oneTimePurchase: oneTimePurchase) {
                named.reasons.insert(.recoveredInWindow)
                named.needsHistory = named.needsHistory || question.needsTransactionHistory
            }
            return named.reasons.isEmpty ? nil : named
        }
    }
}
