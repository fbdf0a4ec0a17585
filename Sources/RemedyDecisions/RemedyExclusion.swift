import Decisions
package import Foundation
package import LedgerModel

/// One remedy per outage (issue 62): the per-subscription extensions of a window and the mass
/// extension of an overlapping window exclude each other per product, whichever came first. An
/// extension cannot be undone, Apple emails the customer, and each uses one of the customer's two
/// extensions in 365 days, so the second remedy sends nothing for a product the first made good,
/// unless the operator says `--again`.
package enum RemedyExclusion {
    /// The skipped outcome's rule.
    package static let rule = "other_remedy"

    /// Whether `remedy` was asked for a window overlapping [start, end).
    package static func overlaps(_ remedy: EarlierRemedy, start: Date, end: Date) -> Bool {
        guard let windowStart = remedy.windowStart, let windowEnd = remedy.windowEnd else { return true }
        return windowStart < end && start < windowEnd
    }

    /// The earlier remedy that made `productId` good for an overlapping window, when `kind` is
    /// about to be sent (nil: send; always nil with `again`): one of the other kind, or for a mass
    /// extension another mass extension too (of another identifier: an overlapping window, or one
    /// kept before its identifier left the days out). The per-subscription remedy's own repeats are
    /// its own rule (one missed notification made good once).
    package static func excluding(
        _ remedies: [EarlierRemedy], kind: EarlierRemedy.Kind, productId: String?, start: Date, end: Date, again: Bool
    ) -> EarlierRemedy? {
        guard !again, let productId else { return nil }
        return remedies.first { ($0.kind != kind || kind == .mass) && $0.productId == productId && overlaps($0, start: start, end: end) }
    }

    /// Why nothing was sent: which remedy made the product good, when, for how many, how many days.
    package static func detail(_ remedy: EarlierRemedy) -> String {
        let what = remedy.kind == .mass ? "a mass extension (--all-active)" : "the per-subscription extensions"
        let window = remedy.windowStart.map { start in
            " of the window \(OutageWindow.format(start)) to \(remedy.windowEnd.map(OutageWindow.format) ?? "?")"
        } ?? ""
        let count = remedy.subscribers.map { " for \($0) subscriber\($0 == 1 ? "" : "s")" } ?? ""
        return "made good by \(what)\(window), asked \(OutageWindow.format(remedy.requestedAt))\(count), \(remedy.days) day\(remedy.days == 1 ? "" : "s"): "
            + "nothing sent (one remedy per outage; --again sends anyway)"
    }
}
