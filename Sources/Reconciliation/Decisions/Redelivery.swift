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
            throw DeliveryTargetError(description: "\(Self.shown(text)) is not an absolute URL such as https://api.example.com/apple/notifications")
        }
        switch scheme {
        case "https": break
        case "http":
            guard APIBaseURL.isLoopback(host) else {
                throw DeliveryTargetError(description: "uses plain http to \(host), which is not a loopback address; use https")
            }
        default:
            throw DeliveryTargetError(description: "must use https (or http to a loopback address), not \(scheme)")
        }
        guard components.user == nil, components.password == nil else {
            // Not sent as Basic authentication by the HTTP client, and shown in no output: refuse it.
            throw DeliveryTargetError(description: "must not hold a user or password: put a secret token in its path or query instead")
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

/// What is wrong with a delivery URL; the command that took it names its option in front.
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
    /// A round ends after this many POSTs in a row got no answer at all (a handler down or hung):
    /// the rest wait for the next round, run or `deliver`, rather than a timeout each.
    package var unansweredInARowEndingARound: Int

    package init(
        rounds: Int = 5, firstDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30), requestTimeout: Duration = .seconds(10),
        unansweredInARowEndingARound: Int = 3
    ) {
        self.unansweredInARowEndingARound = max(1, unansweredInARowEndingARound)
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
    /// Redirects are not followed (a 3xx is a refusal): following one would POST the payload
    /// where the target did not say, or turn the POST into a GET whose 2xx would count.
    package static func delivers(status: Int) -> Bool { (200..<300).contains(status) }

    /// The pauses and timeout in words, for `--help`.
    package var summary: String {
        let pauses = (2...max(2, rounds)).map { "\(delay(beforeRound: $0).components.seconds) s" }
        return "\(rounds) rounds" + (rounds > 1 ? " (pauses of \(pauses.joined(separator: ", ")))" : "")
            + ", \(requestTimeout.components.seconds) s per POST; a round ends after \(unansweredInARowEndingARound) POSTs in a row get no answer"
    }
}

/// `serve --forward-to`'s pause between passes while something is pending: the first pause
/// again after a pass that delivered something (a handler that accepts some requests drains at
/// its own pace), doubling up to the maximum after each pass that delivered nothing (a handler
/// that is down is not hammered). Nothing pending: no pause, and the next failing stretch starts
/// from the first pause again.
package struct ForwardingPause: Sendable, Hashable {
    package let first: Duration
    package let maximum: Duration
    private var next: Duration

    package init(first: Duration, maximum: Duration) {
        self.first = first
        self.maximum = max(first, maximum)
        self.next = first
    }

    /// The pause before the next pass, after a pass that ended with `pending` notifications not
    /// delivered and delivered `delivered`; nil when nothing is pending (wait for a new one).
    package mutating func after(pending: Int, delivered: Int) -> Duration? {
        guard pending > 0 else {
            next = first
            return nil
        }
        if delivered > 0 {
            next = first
            return first
        }
        let pause = next
        next = min(next * 2, maximum)
        return pause
    }
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
    /// Another process was delivering to the target: this run sent nothing and left what it
    /// recorded pending for that process (or the next run, or `deliver`).
    package var leftToAnotherDeliverer = false
    /// A stop request ended the delivery early (what was not sent stays pending).
    package var stopped = false
    /// A dry run: the notificationUUIDs it would deliver, in the order it would (signedDate).
    package var wouldDeliver: [String]?

    package init(target: String) {
        self.target = target
    }
}
