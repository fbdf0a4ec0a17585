import AppStoreServerModel
import Crypto
import Foundation

/// The team's own webhook handler, where recovered notifications are re-delivered: https, or
/// plain http to a loopback address only (like the API base URL), so that nothing signed for the
/// app crosses a network in clear text. A credential goes in a header (`headers`, its value read
/// from an environment variable or a file), not in the URL: the URL's path and query are shown
/// nowhere, and the ledger keys the target by `key`, which holds no query.
package struct DeliveryTarget: Hashable, Sendable, CustomStringConvertible {
    /// The URL as given: where the POSTs go. Never shown, logged or stored.
    package let url: String
    /// The target's key in `app_store.deliveries`: the URL without its query or fragment, and when
    /// it had one, `#query-sha256=` with the first 16 hex digits of the whole URL's SHA-256
    /// (migration 0018 computes the same from the URLs stored before).
    package let key: String
    /// Sent with every POST (`--forward-header`, `--deliver-header`, `deliver --header`).
    package var headers: DeliveryHeaders

    package init(_ text: String, headers: DeliveryHeaders = DeliveryHeaders()) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            throw DeliveryTargetError(description: "is not an absolute URL such as https://api.example.com/apple/notifications")
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
            throw DeliveryTargetError(description: "must not hold a user or password: send a credential as a header whose value comes from an environment variable or a file")
        }
        url = text
        key = Self.key(of: text)
        self.headers = headers
    }

    /// The ledger's key for a URL (see `key`).
    package static func key(of url: String) -> String {
        let base = String(url.prefix { $0 != "?" && $0 != "#" })
        guard base.utf8.count < url.utf8.count else { return url }
        let digest = SHA256.hash(data: Array(url.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        return base + "#query-sha256=" + digest
    }

    /// For people and logs: scheme, host and port; the path and query, where a token may hide,
    /// are shown as `/…` and `?…`.
    package var description: String { Self.shown(url) }

    static func shown(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.host != nil else { return "(not a URL)" }
        components.user = nil
        components.password = nil
        let hiddenPath = !components.path.isEmpty && components.path != "/"
        let hiddenQuery = components.query != nil || components.fragment != nil
        components.path = ""
        components.query = nil
        components.fragment = nil
        return (components.string ?? "(not a URL)") + (hiddenPath ? "/…" : "") + (hiddenQuery ? "?…" : "")
    }
}

/// What is wrong with a delivery URL; the command that took it names its option in front.
package struct DeliveryTargetError: Error, CustomStringConvertible, Sendable {
    package var description: String
    package init(description: String) { self.description = description }
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
    /// How long a notification's first POST may take before it counts as failed. Each later
    /// POST of the same notification may take twice as long as the one before, up to
    /// `maximumRequestTimeout` (`requestTimeout(afterAttempts:)`).
    package var requestTimeout: Duration
    /// The longest any POST may take (at least `requestTimeout`).
    package var maximumRequestTimeout: Duration
    /// A round ends after this many POSTs in a row got no answer at all (a handler down or hung):
    /// the rest wait for the next round, run or `deliver`, rather than a timeout each.
    package var unansweredInARowEndingARound: Int
    /// A notification refused this many times (over all runs) is parked as failed: sent no more
    /// until `deliver --retry-failed`.
    package var maximumAttempts: Int
    /// POSTs under way at once. One (the default for runs and `deliver`) keeps each round in order.
    package var concurrency: Int

    package init(
        rounds: Int = 5, firstDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(30), requestTimeout: Duration = .seconds(10),
        unansweredInARowEndingARound: Int = 3, maximumAttempts: Int = 12, concurrency: Int = 1, maximumRequestTimeout: Duration? = nil
    ) {
        self.maximumRequestTimeout = max(requestTimeout, maximumRequestTimeout ?? requestTimeout * Self.timeoutGrowthBound)
        self.unansweredInARowEndingARound = max(1, unansweredInARowEndingARound)
        self.maximumAttempts = max(1, maximumAttempts)
        self.concurrency = max(1, concurrency)
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

    /// How many times the first POST's timeout a later POST may wait, by default.
    package static let timeoutGrowthBound = 6

    /// How long the POST of a notification already sent `attempts` times may take: the first
    /// `requestTimeout`, each later one twice the one before, at most `maximumRequestTimeout`. A
    /// handler that answers a little after the timeout (12 s against 10 s) would otherwise get
    /// every notification again and again, processing each copy, until it is parked; with this,
    /// its second POST waits long enough for its answer.
    package func requestTimeout(afterAttempts attempts: Int) -> Duration {
        var timeout = requestTimeout
        for _ in 0..<max(0, min(attempts, 32)) {
            timeout = timeout * 2
            if timeout >= maximumRequestTimeout { return maximumRequestTimeout }
        }
        return min(timeout, maximumRequestTimeout)
    }

    /// Whether an answer delivers the notification: any 2xx, as Apple counts its own deliveries.
    /// Redirects are not followed (a 3xx is a refusal): following one would POST the payload
    /// where the target did not say, or turn the POST into a GET whose 2xx would count.
    package static func delivers(status: Int) -> Bool { (200..<300).contains(status) }

    /// The pauses and timeout in words, for `--help`.
    package var summary: String {
        let pauses = (2...max(2, rounds)).map { "\(delay(beforeRound: $0).components.seconds) s" }
        return "\(rounds) rounds" + (rounds > 1 ? " (pauses of \(pauses.joined(separator: ", ")))" : "")
            + ", \(requestTimeout.components.seconds) s for a notification's first POST (doubling for each later one, at most \(maximumRequestTimeout.components.seconds) s), \(concurrency) at once, fewest attempts first; a round ends after \(unansweredInARowEndingARound) POSTs in a row get no answer; "
            + "a notification refused \(maximumAttempts) times is parked as failed"
    }
}

/// What re-delivery did for one target in a run (or, dry, would do): the report's and the
/// metrics' delivered, failed and pending counts.
package struct RedeliverySummary: Sendable, Codable, Hashable {
    /// The target as people see it (`DeliveryTarget.description`: no credentials, no query).
    package var target: String
    /// Answered 2xx in this run.
    package var delivered = 0
    /// Tried in this run and refused in every round (still pending, or parked).
    package var failed = 0
    /// Parked in this run after their last allowed attempt (`deliver --retry-failed` sends them again).
    package var parked = 0
    /// Parked for the target when the run ended, this run's included.
    package var parkedInAll = 0
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
