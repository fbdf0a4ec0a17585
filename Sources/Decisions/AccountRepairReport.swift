import Foundation
import LedgerModel
import SignedData

/// Pass 2: what repairing one Apple account found and did (report.json's `repairs[]`, a contract).
package struct AccountRepairReport: Sendable, Codable {
    /// What pass 2 did to the account; the raw values are report.json's.
    package enum Outcome: String, Sendable, Codable {
        /// Rows were written (in a dry run: would be).
        case repaired
        /// Every row already equals Apple's answer: nothing written.
        case unchanged
        /// Apple could not answer for the account: see `failure`.
        case failed
    }

    /// The originalTransactionId that selected the account.
    package var originalTransactionId: String
    /// The rules that selected the customer (`GapReason` raw values).
    package var reasons: [String]
    /// The first of `reasons`, for readers that want one.
    package var reason: String { reasons.first ?? "" }
    package var transactionsAdded: [String] = []
    package var transactionsChanged: [String] = []
    /// Refunds that only this repair found (money back to the customer: `RevocationKind.isRefund`).
    package var refundsFound: [String] = []
    /// Every revocation only this repair found, each named for what it is (a full or prorated
    /// refund, Family Sharing revoked, or a kind Apple added later).
    package var revocationsFound: [RepairPlanner.RevocationFound] = []
    /// Each changed field of the subscription, before → after.
    package var changes: [RepairPlanner.Change] = []
    /// Each changed field of a transaction the ledger held (in report.json only when there is one).
    package var transactionChanges: [RepairPlanner.Change] = []
    package var outcome = Outcome.unchanged
    /// Why the account could not be checked (Apple's error code and message, or retries exhausted).
    package var failure: String?
    /// Apple's error code when it answered that it does not know the account (4040010, …): what
    /// an import and `customer` decide on (`ImportRoute.asksSandbox`).
    package var appleAnswer: String?
    /// Where the account was found when not in the run's own pair (an import's Sandbox pair).
    package var environment: String?
    /// The account's key (`app_store.accounts.account_id`), and every originalTransactionId
    /// Apple's answers showed in it.
    package var account: String?
    package var members: [String] = []
    package var transactionHistoryRequests = 0
    /// Whether the transaction history started from the account's stored revision.
    package var fromStoredRevision = false
    package var subscriptionStatusesRequests = 0
    package var rejected = 0

    package init(originalTransactionId: String, reasons: [String]) {
        self.originalTransactionId = originalTransactionId
        self.reasons = reasons
    }

    enum CodingKeys: String, CodingKey {
        case originalTransactionId, reasons, reason, transactionsAdded, transactionsChanged, refundsFound, revocationsFound, changes, transactionChanges, outcome
        case transactionHistoryRequests, rejected, failure, account, members, fromStoredRevision, subscriptionStatusesRequests, environment, appleAnswer
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
        try container.encode(reasons, forKey: .reasons)
        try container.encode(reason, forKey: .reason)
        try container.encode(transactionsAdded, forKey: .transactionsAdded)
        try container.encode(transactionsChanged, forKey: .transactionsChanged)
        try container.encode(refundsFound, forKey: .refundsFound)
        try container.encode(revocationsFound, forKey: .revocationsFound)
        try container.encode(changes, forKey: .changes)
        if !transactionChanges.isEmpty { try container.encode(transactionChanges, forKey: .transactionChanges) }
        try container.encode(outcome, forKey: .outcome)
        try container.encode(transactionHistoryRequests, forKey: .transactionHistoryRequests)
        try container.encode(rejected, forKey: .rejected)
        try container.encodeIfPresent(failure, forKey: .failure)
        try container.encodeIfPresent(account, forKey: .account)
        try container.encode(members, forKey: .members)
        try container.encode(fromStoredRevision, forKey: .fromStoredRevision)
        try container.encode(subscriptionStatusesRequests, forKey: .subscriptionStatusesRequests)
        try container.encodeIfPresent(environment, forKey: .environment)
        try container.encodeIfPresent(appleAnswer, forKey: .appleAnswer)
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = try container.decode(String.self, forKey: .originalTransactionId)
        reasons = try container.decode([String].self, forKey: .reasons)
        transactionsAdded = try container.decode([String].self, forKey: .transactionsAdded)
        transactionsChanged = try container.decode([String].self, forKey: .transactionsChanged)
        refundsFound = try container.decode([String].self, forKey: .refundsFound)
        revocationsFound = try container.decodeIfPresent([RepairPlanner.RevocationFound].self, forKey: .revocationsFound) ?? []
        changes = try container.decode([RepairPlanner.Change].self, forKey: .changes)
        transactionChanges = try container.decodeIfPresent([RepairPlanner.Change].self, forKey: .transactionChanges) ?? []
        outcome = try container.decode(Outcome.self, forKey: .outcome)
        transactionHistoryRequests = try container.decode(Int.self, forKey: .transactionHistoryRequests)
        rejected = try container.decode(Int.self, forKey: .rejected)
        failure = try container.decodeIfPresent(String.self, forKey: .failure)
        account = try container.decodeIfPresent(String.self, forKey: .account)
        members = try container.decodeIfPresent([String].self, forKey: .members) ?? []
        fromStoredRevision = try container.decodeIfPresent(Bool.self, forKey: .fromStoredRevision) ?? false
        subscriptionStatusesRequests = try container.decodeIfPresent(Int.self, forKey: .subscriptionStatusesRequests) ?? 0
        environment = try container.decodeIfPresent(String.self, forKey: .environment)
        appleAnswer = try container.decodeIfPresent(String.self, forKey: .appleAnswer)
    }
}
