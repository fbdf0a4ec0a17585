import Foundation
package import LedgerModel

/// One account's case for a support engineer (`customer`): the ledger's rows and Apple's answer
/// side by side, the differences named field by field, the notifications recorded for the account
/// in time order, and what the entitlements view grants it now (`customer --json`, a contract).
/// Built from values: the ledger's rows as read before any repair, and the account's repair
/// report (a dry run's, or with `--repair` the real one's), whose changes are Apple's answer
/// where it differs.
package struct CustomerCase: Sendable, Encodable {
    /// One field of one subscription: the ledger's value and Apple's.
    package struct Field: Sendable, Codable, Hashable {
        package var originalTransactionId: String
        package var field: String
        package var ledger: String?
        package var apple: String?
        package var differs: Bool
    }

    /// The account's key (`app_store.accounts.account_id`) once a repair has grouped it.
    package var account: String?
    /// Every originalTransactionId Apple's answer showed in the account.
    package var members: [String]
    /// Every compared field of every subscription, the ledger's beside Apple's.
    package var subscriptions: [Field]
    /// Transactions Apple has that the ledger lacks, and those whose content differs.
    package var transactionsMissing: [String]
    package var transactionsDiffering: [String]
    package var notifications: [RecordedNotification]
    package var entitlements: [Entitlement]
    /// Why Apple could not answer for the account (then nothing is compared).
    package var failure: String?
    /// `--repair` wrote Apple's truth (the differences are what it wrote).
    package var repaired: Bool
    /// Where the account was found when not in the command's pair: "Sandbox" for a TestFlight or
    /// App Review purchase of a production app (Production answered 4040010).
    package var foundInEnvironment: String?

    /// The number of differences: fields, and transactions missing or differing.
    package var differences: Int { subscriptions.count(where: \.differs) + transactionsMissing.count + transactionsDiffering.count }

    /// Whether the ledger agrees with Apple now (after `--repair`, when it was given).
    package var agrees: Bool { failure == nil && (differences == 0 || repaired) }

    package init(
        ledger: [SubscriptionRecord], report: AccountRepairReport, notifications: [RecordedNotification], entitlements: [Entitlement], repaired: Bool
    ) {
        account = report.account
        members = report.members.isEmpty ? [report.originalTransactionId] : report.members
        failure = report.failure
        self.repaired = repaired && report.outcome == .repaired
        transactionsMissing = report.transactionsAdded
        transactionsDiffering = report.transactionsChanged
        self.notifications = notifications
        self.entitlements = entitlements
        subscriptions = Self.sideBySide(ledger: ledger, changes: report.changes, members: members)
    }

    enum CodingKeys: String, CodingKey {
        case account, members, subscriptions, transactionsMissing, transactionsDiffering, notifications, entitlements, failure, repaired
        case differences, agrees, foundInEnvironment
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(account, forKey: .account)
        try container.encode(members, forKey: .members)
        try container.encode(subscriptions, forKey: .subscriptions)
        try container.encode(transactionsMissing, forKey: .transactionsMissing)
        try container.encode(transactionsDiffering, forKey: .transactionsDiffering)
        try container.encode(notifications, forKey: .notifications)
        try container.encode(entitlements, forKey: .entitlements)
        try container.encodeIfPresent(failure, forKey: .failure)
        try container.encode(repaired, forKey: .repaired)
        try container.encode(differences, forKey: .differences)
        try container.encode(agrees, forKey: .agrees)
        try container.encodeIfPresent(foundInEnvironment, forKey: .foundInEnvironment)
    }

    /// Every compared column of each subscription: the ledger's value, and Apple's (the change's
    /// value where the repair found one, else the ledger's). A subscription the ledger lacks shows
    /// only Apple's side.
    static func sideBySide(ledger: [SubscriptionRecord], changes: [RepairPlanner.Change], members: [String]) -> [Field] {
        let rows = Dictionary(ledger.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { first, _ in first })
        var changed: [String: [String: RepairPlanner.Change]] = [:]
        for change in changes {
            changed[change.originalTransactionId ?? "", default: [:]][change.field] = change
        }
        let subscriptions = Set(rows.keys).union(changed.keys.filter { !$0.isEmpty }).sorted()
        var fields: [Field] = []
        for id in subscriptions {
            let row = rows[id]
            for column in SubscriptionRecord.columns where column.compared {
                let ledgerValue = row.flatMap(column.get)?.description
                if let change = changed[id]?[column.fieldName] {
                    fields.append(Field(originalTransactionId: id, field: column.fieldName, ledger: change.before, apple: change.after, differs: true))
                } else if row != nil {
                    fields.append(Field(originalTransactionId: id, field: column.fieldName, ledger: ledgerValue, apple: ledgerValue, differs: false))
                }
            }
        }
        return fields
    }
}
