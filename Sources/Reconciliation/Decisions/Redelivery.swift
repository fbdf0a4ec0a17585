import AppStoreServerAPI
import Foundation

/// The team's own webhook handler, where recovered notifications are re-delivered: https, or
/// plain http to a loopback address only (like the API base URL), so that nothing signed for the
/// app crosses a network in clear text.
package struct DeliveryTarget: Hashable, Sendable, CustomStringConvertible {
    /// The URL as given: the key of its rows in `app_store.deliveries`.
    package let url: String

    package init(_ text: String) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            throw DeliveryTargetError(description: "--deliver-to \(Self.shown(text)) is not an absolute URL such as https://api.example.com/apple/notifications")
        }
        switch scheme {
        case "https": break
        case "http":
            guard APIBaseURL.isLoopback(host) else {
                throw DeliveryTargetError(description: "--deliver-to uses plain http to \(host), which is not a loopback address; use https")
            }
        default:
            throw DeliveryTargetError(description: "--deliver-to must use https (or http to a loopback address), not \(scheme)")
        }
        url = text
    }

    /// For people and logs: without user, password, query or fragment, where a token may hide.
    package var description: String { Self.shown(url) }

    static func shown(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.host != nil else { return "(not a URL)" }
        components.user = nil
        components.password = nil
        let hidden = components.query != nil || components.fragment != nil
        components.query = nil
        components.fragment = nil
        return (components.string ?? "(not a URL)") + (hidden ? "?…" : "")
    }
}

package struct DeliveryTargetError: Error, CustomStringConvertible, Sendable {
    package var description: String
}

/// How a run re-delivers: rounds over what is pending, in `signedDate` order, the first right
/// away and each later one after a growing pause, for the deliveries the earlier rounds could
/// not make. A notification refused in every round stays pending for the next run or `deliver`.
package struct DeliveryPolicy: Sendable, Hashable {
    /// Rounds within one run (at least 1).
    package var rounds: Int
    /// The pause before the second round; each later pause doubles, up to `maximumDelay`.
    package var firstDelay: Duration
    package var maximumDelay: Duration
    /// How long one POST may take before it counts as failed.
    package var requestTimeout: Duration

    package init(rounds: Int = 5, firstDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30), requestTimeout: Duration = .seconds(10)) {
        self.rounds = max(1, rounds)
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.requestTimeout = requestTimeout
    }

    /// The pause before round `round` (1-based): none before the first.
    package func delay(beforeRound round: Int) -> Duration {
        guard round > 1 else { return .zero }
        var delay = firstDelay
        for _ in 2..<round { delay = min(delay * 2, maximumDelay) }
        return min(delay, maximumDelay)
    }

    /// Whether an answer delivers the notification: any 2xx, as Apple counts its own deliveries.
    package static func delivers(status: Int) -> Bool { (200..<300).contains(status) }
}

/// What re-delivery did for one target in a run (or, dry, would do): the report's and the
/// metrics' delivered, failed and pending counts.
package struct RedeliverySummary: Sendable, Codable, Hashable {
    /// The target as people see it (`DeliveryTarget.description`: no credentials, no query).
    package var target: String
    /// Answered 2xx in this run.
    package var delivered = 0
    /// Tried in this run and refused in every round (still pending).
    package var failed = 0
    /// Not yet delivered to the target when the run ended (the failed ones included); in a dry
    /// run, what the run would deliver.
    package var pending = 0
    /// POSTs sent in this run.
    package var attempts = 0
    /// A dry run: the notificationUUIDs it would deliver, in the order it would (signedDate).
    package var wouldDeliver: [String]?

    package init(target: String) {
        self.target = target
    }
}
