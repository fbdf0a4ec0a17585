import Foundation

/// What an `audit` found (report.json's `audit`, a contract; issue 64, point 2): of a uniformly
/// random sample of one App Store's subscriptions, each account compared field by field with
/// Apple's answer as a named repair compares it, how many differed, and the bound that gives on
/// the share of the ledger's accounts that differ. Derived here, once, from the accounts' repair
/// reports: an account Apple does not know is reported apart (not counted as differing), one
/// Apple did not answer for, or whose answer did not verify whole, is not counted as sampled,
/// and the bound is over what was sampled.
package struct LedgerAuditReport: Sendable, Codable, Equatable {
    /// One field where the ledger and Apple disagree.
    package struct Difference: Sendable, Codable, Equatable {
        /// The account's key (`app_store.accounts.account_id`).
        package var account: String
        package var originalTransactionId: String?
        /// Set for a transaction's field.
        package var transactionId: String?
        /// The field as repairs name it (`expiresDate`, `isUpgraded`, …), or `transaction` for a
        /// transaction the ledger lacks.
        package var field: String
        /// What the ledger holds (nil: nothing).
        package var ledger: String?
        /// What Apple answered.
        package var apple: String?
    }

    /// An account of the sample Apple answered it does not know.
    package struct Unknown: Sendable, Codable, Equatable {
        package var originalTransactionId: String
        /// Apple's error code (4040010, …).
        package var appleAnswer: String?
    }

    /// The sample asked for (`--sample`).
    package var requested: Int
    /// Accounts compared with Apple's whole, verified answer: the bound's n.
    package var sampled: Int
    /// Of those, accounts where at least one field differs: the bound's x.
    package var differing: Int
    /// The exact binomial upper bound, at 95%, of the share of accounts that differ (nil when
    /// nothing was sampled).
    package var upperBound95: Double?
    /// Every subscription of the App Store was in the sample (it asked for as many or more).
    package var wholeLedger: Bool
    /// Whether `--repair` wrote Apple's answer over the differing accounts.
    package var repaired: Bool
    /// Apple did not answer for these many accounts (retries exhausted), or an answer did not
    /// verify whole: not compared, not in `sampled`.
    package var notCompared: Int
    /// The audit ended before every account drawn was asked about (stopped, or Apple down):
    /// its bound is over what it sampled.
    package var cutShort: Bool
    package var unknownToApple: [Unknown]
    package var differingAccounts: [String]
    package var differences: [Difference]

    /// - Parameter stopped: the audit stopped before every account drawn was asked about.
    package init(requested: Int, wholeLedger: Bool, repaired: Bool, accounts: some Sequence<AccountRepairReport>, stopped: Bool) {
        self.requested = requested
        self.wholeLedger = wholeLedger
        self.repaired = repaired
        sampled = 0
        differing = 0
        notCompared = 0
        unknownToApple = []
        differingAccounts = []
        differences = []
        // One account may be drawn under two of its subscriptions, and checked under both before
        // the ledger knew they were one account: it counts once, differing if either check differed.
        var compared: [String: Bool] = [:]
        for account in accounts {
            let key = account.account ?? account.originalTransactionId
            if account.outcome == .failed {
                if account.appleAnswer != nil {
                    unknownToApple.append(Unknown(originalTransactionId: account.originalTransactionId, appleAnswer: account.appleAnswer))
                } else {
                    notCompared += 1
                }
                continue
            }
            guard account.rejected == 0 else {
                notCompared += 1
                continue
            }
            let differs = account.outcome == .repaired
            let before = compared[key]
            compared[key] = (before ?? false) || differs
            guard differs else { continue }
            if before != true { differingAccounts.append(key) }
            for change in account.changes {
                differences.append(
                    Difference(account: key, originalTransactionId: change.originalTransactionId, field: change.field, ledger: change.before, apple: change.after))
            }
            for id in account.transactionsAdded {
                differences.append(Difference(account: key, originalTransactionId: nil, transactionId: id, field: "transaction", ledger: nil, apple: id))
            }
            for change in account.transactionChanges {
                differences.append(
                    Difference(
                        account: key, originalTransactionId: change.originalTransactionId, transactionId: change.transactionId, field: change.field,
                        ledger: change.before, apple: change.after))
            }
        }
        sampled = compared.count
        differing = compared.values.count(where: { $0 })
        cutShort = stopped || notCompared > 0
        upperBound95 = AuditBound.upperBound95(differing: differing, sampled: sampled)
    }

    enum CodingKeys: String, CodingKey {
        case requested, sampled, differing, upperBound95, wholeLedger, repaired, notCompared, cutShort, unknownToApple, differingAccounts, differences
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(requested, forKey: .requested)
        try container.encode(sampled, forKey: .sampled)
        try container.encode(differing, forKey: .differing)
        // null, not absent, when nothing was sampled: the key is always there.
        try container.encode(upperBound95, forKey: .upperBound95)
        try container.encode(wholeLedger, forKey: .wholeLedger)
        try container.encode(repaired, forKey: .repaired)
        try container.encode(notCompared, forKey: .notCompared)
        try container.encode(cutShort, forKey: .cutShort)
        try container.encode(unknownToApple, forKey: .unknownToApple)
        try container.encode(differingAccounts, forKey: .differingAccounts)
        try container.encode(differences, forKey: .differences)
    }
}
