package import Decisions
import Foundation
import LedgerModel

/// `customer --json`: `{bundleId, environment, agrees, cases[]}` (a contract).
extension CustomerCase {
    package static func json(bundleId: String, environment: String, cases: [CustomerCase]) throws -> String {
        struct Output: Encodable {
            var bundleId: String
            var environment: String
            var agrees: Bool
            var cases: [CustomerCase]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let output = Output(bundleId: bundleId, environment: environment, agrees: cases.allSatisfy(\.agrees), cases: cases)
        return String(decoding: try encoder.encode(output), as: UTF8.self)
    }
}

/// `customer`'s page for a person: each account's fields, the ledger's beside Apple's, the
/// differences marked, the notifications recorded in time order, the entitlements now.
extension CustomerCase {
    package func text(pair: String) -> String {
        var lines: [String] = []
        let where_ = foundInEnvironment.map { "\(pair) → found in \($0) (not in the command's environment: App Review, TestFlight)" } ?? pair
        lines.append("Account \(account ?? members.first ?? "?") · \(where_) · originalTransactionIds: \(members.joined(separator: ", "))")
        if let failure {
            lines.append("  Apple could not answer for it: \(failure)")
            return lines.joined(separator: "\n")
        }
        lines.append("")
        let widths = (
            field: max(24, subscriptions.map { $0.field.count }.max() ?? 0),
            ledger: max(28, subscriptions.map { ($0.ledger ?? "—").count }.max() ?? 0)
        )
        func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        var current: String?
        for field in subscriptions {
            if field.originalTransactionId != current {
                current = field.originalTransactionId
                lines.append("  subscription \(field.originalTransactionId)")
                lines.append("    \(pad("field", widths.field))  \(pad("ledger", widths.ledger))  Apple")
            }
            lines.append(
                "    \(pad(field.field, widths.field))  \(pad(field.ledger ?? "—", widths.ledger))  \(field.apple ?? "—")\(field.differs ? "   ← differs" : "")"
            )
        }
        if subscriptions.isEmpty { lines.append("  no subscription (one-time purchases only)") }
        lines.append("")
        lines.append(
            "  transactions: \(transactionsMissing.count) Apple has that the ledger lacks\(Self.list(transactionsMissing)), "
                + "\(transactionsDiffering.count) that differ\(Self.list(transactionsDiffering))"
        )
        lines.append("")
        lines.append("  notifications recorded (\(notifications.count), in the order Apple signed them):")
        for notification in notifications {
            let type = notification.type + (notification.subtype.map { "/\($0)" } ?? "")
            let source = notification.source == "history" ? "recovered" : notification.source
            lines.append(
                "    \(notification.signedDate.formatted(.iso8601))  \(pad(type, 36))  \(pad(source, 9))  recorded \(notification.recordedAt.formatted(.iso8601))  \(notification.originalTransactionId)"
            )
        }
        lines.append("")
        if entitlements.isEmpty {
            lines.append("  entitlements now: none (app_store.entitlements grants this account nothing)")
        } else {
            lines.append("  entitlements now:")
            for entitlement in entitlements {
                lines.append(
                    "    \(entitlement.productId ?? "?") (\(entitlement.productType ?? "?"))"
                        + (entitlement.expiresDate.map { " until \($0.formatted(.iso8601))" } ?? "") + " · \(entitlement.originalTransactionId)"
                )
            }
        }
        lines.append("")
        if differences == 0 {
            lines.append("  The ledger agrees with Apple.")
        } else if repaired {
            lines.append("  Repaired: \(differences) difference(s) written from Apple's answer.")
        } else {
            lines.append("  The ledger differs from Apple in \(differences) place(s): run again with --repair to write Apple's answer.")
        }
        return lines.joined(separator: "\n")
    }

    static func list(_ ids: [String]) -> String {
        guard !ids.isEmpty else { return "" }
        return " (" + ids.prefix(10).joined(separator: ", ") + (ids.count > 10 ? ", …" : "") + ")"
    }
}
