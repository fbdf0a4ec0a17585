import Decisions
import Foundation
package import RemedyDecisions

/// What `compensate` did for one pair: the window (or the mass remedy's intent), each hurt
/// subscription with its outcome, each mass extension with Apple's counts.
package struct CompensationResult: Sendable, Codable, Hashable {
    /// The window compensated (ISO 8601); nil for `--all-active` without one.
    package var windowStart: String?
    package var windowEnd: String?
    package var minimumHours: Double?
    /// `--days`, when given.
    package var days: Int?
    /// Granting notifications the runs recovered in the window (what the hurt were chosen from).
    package var missedGrants = 0
    /// Of those, the ones recorded before the access they continue ended (a renewal Apple charged
    /// early, recovered before the old period ran out): they denied nothing.
    package var recordedBeforeAccessEnded = 0
    package var extensions: [RenewalExtensionReport] = []
    package var massExtensions: [MassExtensionReport] = []
    /// Requests to Apple's extension endpoints.
    package var requestsToApple = 0
    /// Stopped on request before every subscription was looked at.
    package var stopped = false

    package init(windowStart: String? = nil, windowEnd: String? = nil, minimumHours: Double? = nil, days: Int? = nil) {
        self.windowStart = windowStart
        self.windowEnd = windowEnd
        self.minimumHours = minimumHours
        self.days = days
    }

    /// Subscriptions by outcome.
    package var byOutcome: [String: Int] {
        extensions.reduce(into: [:]) { counts, entry in counts[entry.outcome, default: 0] += 1 }
    }

    /// Refused by Apple, or left pending, in this run (and mass extensions refused or not yet
    /// complete): exit code 3.
    package var needingAPerson: Int { extensions.count { $0.needsAPerson } + massExtensions.count { $0.needsAPerson } }
}
