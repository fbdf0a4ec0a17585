import Foundation
package import LedgerModel
package import SignedData

/// Pass 2's decisions for one Apple account, as a machine: each event (the ledger's rows read,
/// Apple's answer or refusal, a write's outcome) returns the next action, and `CustomerRepair`
/// executes the actions (postgres-nio's habit: the connection's state machine decides, the
/// channel handler does the I/O). What it decides: whether to ask Apple at all, from which
/// revision, whether the statuses are needed, who is in the account and under which key, what
/// to write and which revision to keep, and what the report says.
package struct AccountRepairMachine: Sendable {
    /// Whom to repair: an originalTransactionId, the transaction ID to ask Apple with, and why.
    package struct Target: Sendable, Hashable {
        /// The originalTransactionId selected (the account's key when it has none yet).
        package var customer: String
        /// The transaction ID to ask Apple with (any of the account's; the original one by default).
        package var transactionId: String
        package var reasons: [GapReason]
        /// Whether Get Transaction History is needed, or the statuses alone tell the truth.
        package var needsTransactionHistory: Bool

        package init(customer: String, transactionId: String? = nil, reasons: [GapReason], needsTransactionHistory: Bool? = nil) {
            self.customer = customer
            self.transactionId = transactionId ?? customer
            self.reasons = reasons
            self.needsTransactionHistory = needsTransactionHistory ?? reasons.contains(where: \.needsTransactionHistory)
        }
    }

    /// What is left to ask Apple for an account in this pass (other targets of the pass may have
    /// checked it already).
    package enum Need: Equatable, Sendable {
        case nothing
        case transactionHistoryOnly
        case everything
    }

    /// One page of Get Transaction History, each signed transaction with its verification.
    package struct HistoryPage: Sendable {
        package var transactions: [(signed: String, outcome: VerificationOutcome<TransactionPayload>)]
        package var finalRevision: String?

        package init(transactions: [(signed: String, outcome: VerificationOutcome<TransactionPayload>)], finalRevision: String?) {
            self.transactions = transactions
            self.finalRevision = finalRevision
        }
    }

    /// One subscription of Get All Subscription Statuses, verified: its row and its latest
    /// transaction, or the payload that did not verify.
    package typealias StatusEntry = Result<(record: SubscriptionRecord, transaction: TransactionPayload, signed: String), RejectedStatus>

    package struct RejectedStatus: Error, Sendable {
        package var record: RejectedPayloadRecord

        package init(_ record: RejectedPayloadRecord) {
            self.record = record
        }
    }

    package enum Action: Sendable {
        /// Read the account's row, its members and their rows (`accountRead`).
        case readAccount
        /// The account was checked earlier in the pass: report nothing.
        case skip
        /// Every page of the account's transaction history from `revision` (nil: from the
        /// start), each transaction verified (`historyAnswered`, or `revisionRefused`).
        case fetchHistory(from: String?)
        /// Get All Subscription Statuses, each entry verified (`statusesAnswered`).
        case fetchStatuses
        /// The rows of members the ledger did not know were in the account (`rowsRead`).
        case readRows([String])
        /// A dry run's planned writes, each to be counted by the first repair of the pass that
        /// plans it (`writesClaimed`); `members` are checked now.
        case claimPlannedWrites(transactions: [String], subscriptions: [String], members: Set<String>)
        /// Write the batch in one database transaction (`written`); `members` are checked now.
        case write(LedgerBatch, members: Set<String>)
        /// Apple refused the account: record it as checked with Apple's answer (`refusalRecorded`).
        case recordRefusal(LedgerBatch)
        /// Done: the account's report.
        case finish(AccountRepairReport)
    }

    package let target: Target
    package let pair: AppStorePair
    package let dryRun: Bool
    private let overlay: LedgerOverlay
    private(set) package var report: AccountRepairReport
    private var state = StoredAccountState(accountId: nil, revision: nil, members: [], subscriptions: [:], transactions: [])
    private var need = Need.everything
    /// Apple's truth: each transaction's newest version in order of first sight, and the subscriptions.
    private var latest: [String: (payload: TransactionPayload, signed: String)] = [:]
    private var order: [String] = []
    private var truthSubscriptions: [SubscriptionRecord] = []
    private var rejected: [RejectedPayloadRecord] = []
    private var revision = AccountVerification.Revision.unchanged
    private var startedOver = false
    private var members: Set<String> = []
    private var accountId = ""
    private var plan = RepairPlanner.Plan()

    package init(target: Target, pair: AppStorePair, dryRun: Bool, overlay: LedgerOverlay = .init()) {
        self.target = target
        self.pair = pair
        self.dryRun = dryRun
        self.overlay = overlay
        self.report = AccountRepairReport(originalTransactionId: target.customer, reasons: target.reasons.map(\.rawValue))
    }

    /// Only what Apple issues is sent to it: a transaction ID is a string of digits.
    package static func isWellFormedTransactionId(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 32 && id.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    // MARK: Events

    package mutating func start() -> Action {
        guard Self.isWellFormedTransactionId(target.transactionId) else {
            report.outcome = .failed
            report.failure = "'\(target.transactionId.prefix(40))' is not a transaction ID Apple issues (digits only): not sent to Apple"
            return .finish(report)
        }
        return .readAccount
    }

    /// The ledger's account (read on one lease: the writes are guarded by signedDate in SQL, so a
    /// live write between this read and them is never undone), and what the pass left to ask.
    package mutating func accountRead(_ state: StoredAccountState, need: Need) -> Action {
        self.state = state
        self.need = need
        guard need != .nothing else { return .skip }
        if target.needsTransactionHistory { return .fetchHistory(from: startRevision) }
        return afterHistory()
    }

    /// A named repair exists because someone believes the ledger is wrong: from the stored
    /// revision Apple returns only what changed since, and a wrong row Apple never touched would
    /// stay wrong. It fetches the whole history, then stores the new revision as any repair does;
    /// so does an import, which takes the account whole, and an audit, which compares it whole.
    private var startRevision: String? {
        target.reasons.contains(.named) || target.reasons.contains(.imported) || target.reasons.contains(.audited) ? nil : state.revision
    }

    /// Apple no longer accepts the stored revision: forget it and fetch everything.
    package mutating func revisionRefused() -> Action {
        guard !startedOver else {
            // Refused without a revision too: Apple's answer makes no sense, and asking again would loop.
            report.outcome = .failed
            report.failure = "Apple refused the transaction history from its start as an invalid revision"
            return .finish(report)
        }
        startedOver = true
        return .fetchHistory(from: nil)
    }

    package mutating func historyAnswered(_ pages: [HistoryPage]) -> Action {
        report.transactionHistoryRequests = pages.count
        report.fromStoredRevision = startRevision != nil && !startedOver
        for page in pages {
            for (signed, outcome) in page.transactions {
                switch outcome {
                case .verified(let transaction):
                    // Ascending by modification: the last version seen is the newest.
                    take(transaction, signed, replacing: true)
                case .rejected(let rejection):
                    report.rejected += 1
                    rejected.append(
                        RejectedPayloadRecord(
                            source: "transaction-history", notificationUUID: nil, reason: rejection.reason.rawValue, detail: rejection.detail,
                            signedPayload: signed
                        )
                    )
                case .retryLater:
                    report.rejected += 1
                }
            }
        }
        if let final = pages.last?.finalRevision {
            revision = .store(final)
        } else if startedOver {
            revision = .forget
        }
        return afterHistory()
    }

    /// The statuses, unless they were asked for this account earlier in the pass (only its
    /// history was missing), or the history shows no subscription.
    private mutating func afterHistory() -> Action {
        let mayHaveSubscriptions = !target.needsTransactionHistory || !state.subscriptions.isEmpty
            || latest.values.contains { $0.payload.type == .autoRenewable }
        if mayHaveSubscriptions && need != .transactionHistoryOnly { return .fetchStatuses }
        return membership()
    }

    package mutating func statusesAnswered(_ entries: [StatusEntry]) -> Action {
        report.subscriptionStatusesRequests = 1
        for entry in entries {
            switch entry {
            case .success(let truth):
                truthSubscriptions.append(truth.record)
                // History's version, when asked, is as new: the statuses' latest transaction
                // fills in only what history did not bring.
                take(truth.transaction, truth.signed, replacing: false)
            case .failure(let failure):
                report.rejected += 1
                rejected.append(failure.record)
            }
        }
        return membership()
    }

    /// Apple's answer concerns the account (not found, invalid): reported for it, and settled:
    /// recorded as checked now with Apple's answer, so that only something new recorded for it
    /// selects it again (not every nightly run, each exiting 3). An ID the ledger holds nothing
    /// of (a mistyped `repair --transaction-id`) leaves no row.
    package mutating func appleRefused(answer: String?, description: String) -> Action {
        report.outcome = .failed
        report.failure = "Apple answered \(description)"
        report.appleAnswer = answer
        guard !dryRun, state.accountId != nil || ledgerHoldsTarget else { return .finish(report) }
        var batch = LedgerBatch(cause: .repair)
        batch.accounts = [
            AccountVerification(
                pair: pair, accountId: state.accountId ?? target.customer, members: state.members + [target.customer], revision: .unchanged,
                verified: true, transactionsChecked: true, appleAnswer: answer
            )
        ]
        return .recordRefusal(batch)
    }

    package mutating func refusalRecorded() -> Action { .finish(report) }

    /// Apple did not answer within the retry budget.
    package mutating func appleSilent(_ description: String) -> Action {
        report.outcome = .failed
        report.failure = "Apple did not answer: \(description)"
        return .finish(report)
    }

    /// The rows of members Apple named that the ledger did not know were in the account.
    package mutating func rowsRead(subscriptions: [String: SubscriptionRecord], transactions: [TransactionRecord]) -> Action {
        state.subscriptions.merge(subscriptions) { stored, _ in stored }
        state.transactions += transactions
        return planned()
    }

    /// Of the dry run's planned writes, those no repair of the pass planned before.
    package mutating func writesClaimed(transactions: Set<String>, subscriptions: Set<String>) -> Action {
        // Two targets of one account Apple had not yet named to the ledger are repaired side by
        // side, and each plans the account's writes. In a real run the second writer finds the
        // rows already written, and changes nothing; a dry run counts a write once too.
        report(changedTransactions: transactions, changedSubscriptions: subscriptions)
        return .finish(report)
    }

    /// What was written, not what was planned: a live write may have got there first.
    package mutating func written(_ outcome: LedgerBatchOutcome) -> Action {
        report(changedTransactions: outcome.changedTransactions, changedSubscriptions: outcome.changedSubscriptions)
        return .finish(report)
    }

    // MARK: Decisions

    /// Whether the ledger holds rows of the target (its subscription, or a transaction of it).
    private var ledgerHoldsTarget: Bool {
        state.subscriptions[target.customer] != nil || state.transactions.contains { $0.originalTransactionId == target.customer }
    }

    private mutating func take(_ transaction: TransactionPayload, _ signed: String, replacing: Bool) {
        guard let id = transaction.transactionId else { return }
        if latest[id] == nil { order.append(id) } else if !replacing { return }
        latest[id] = (transaction, signed)
    }

    /// Who is in the account: what the ledger knew, and every originalTransactionId Apple named;
    /// its key is the numerically smallest of them (the ledger records it so).
    private mutating func membership() -> Action {
        var named = Set<String>()
        for (payload, _) in latest.values { if let original = payload.originalTransactionId { named.insert(original) } }
        for subscription in truthSubscriptions { named.insert(subscription.originalTransactionId) }
        members = Set(state.members).union(named)
        if ledgerHoldsTarget || named.isEmpty { members.insert(target.customer) }
        accountId = members.union(state.accountId.map { [$0] } ?? []).min { ($0.count, $0) < ($1.count, $1) } ?? target.customer
        report.account = accountId
        if accountId != target.customer, !members.contains(target.customer) { report.originalTransactionId = accountId }
        let unknown = members.subtracting(state.members + [target.customer]).sorted()
        return unknown.isEmpty ? planned() : .readRows(unknown)
    }

    /// The plan from Apple's truth and the rows (with pass 1's planned versions on top in a dry run).
    private mutating func planned() -> Action {
        var storedSubscriptions = state.subscriptions
        for member in members {
            storedSubscriptions[member] = RecoveryPlanner.newer(storedSubscriptions[member], overlay.subscriptions[member])
        }
        plan = RepairPlanner.plan(
            truth: .init(transactions: order.compactMap { latest[$0] }, subscriptions: truthSubscriptions),
            storedTransactions: Self.merge(state.transactions, overlay, customers: members),
            storedSubscriptions: storedSubscriptions
        )
        report.members = members.sorted()
        if dryRun {
            return .claimPlannedWrites(
                transactions: plan.batch.transactions.map(\.transactionId), subscriptions: plan.batch.subscriptions.map(\.originalTransactionId),
                members: members
            )
        }
        var batch = plan.batch
        batch.rejected = rejected
        // A payload of the answer that did not verify must be fetched again: the revision does not
        // move past it, and the account is not recorded as verified (it is selected again).
        let wholeAnswerVerified = report.rejected == 0
        if !wholeAnswerVerified, case .store = revision { revision = state.revision == nil ? .forget : .unchanged }
        batch.accounts = [
            AccountVerification(
                pair: pair, accountId: accountId, members: members.sorted(), revision: revision, verified: wholeAnswerVerified,
                transactionsChecked: target.needsTransactionHistory
            )
        ]
        return .write(batch, members: members)
    }

    private mutating func report(changedTransactions: Set<String>, changedSubscriptions: Set<String>) {
        report.transactionsAdded = plan.transactionsAdded.filter(changedTransactions.contains)
        report.transactionsChanged = plan.transactionsChanged.filter(changedTransactions.contains)
        report.refundsFound = plan.refundsFound.filter(changedTransactions.contains)
        report.revocationsFound = plan.revocationsFound.filter { changedTransactions.contains($0.transactionId) }
        report.changes = plan.changes.filter { $0.originalTransactionId.map(changedSubscriptions.contains) ?? false }
        report.transactionChanges = plan.transactionChanges.filter { $0.transactionId.map(changedTransactions.contains) ?? false }
        report.outcome = changedTransactions.isEmpty && changedSubscriptions.isEmpty ? .unchanged : .repaired
    }

    /// The stored transactions with pass 1's (planned) versions on top.
    package static func merge(_ stored: [TransactionRecord], _ overlay: LedgerOverlay, customers: Set<String>) -> [TransactionRecord] {
        var byId = Dictionary(stored.map { ($0.transactionId, $0) }, uniquingKeysWith: { first, _ in first })
        for customer in customers {
            for record in overlay.transactionsByCustomer[customer] ?? []
            where byId[record.transactionId].map({ $0.signedDate.unixMilliseconds < record.signedDate.unixMilliseconds }) ?? true {
                byId[record.transactionId] = record
            }
        }
        return Array(byId.values)
    }
}
