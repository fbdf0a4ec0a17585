import Foundation

/// The small audit every `nightly` runs after its passes (issue 64, point 2): so that every
/// deployment measures its own correctness every night. `sample` accounts per App Store (0: none),
/// asked about at no more than `maxShareOfRateLimit` of Apple's rate for the endpoints it calls,
/// so that the night's other work and the live traffic keep the rest. The configuration's
/// `audit.sample` and `audit.maxShareOfRateLimit`.
package struct NightlyAudit: Hashable, Sendable {
    package var sample: Int
    package var maxShareOfRateLimit: Double

    /// 300 accounts: a clean sample bounds the drift under 1% (1 − 0.05^(1/300) = 0.99%); a tenth
    /// of the rate: at Apple's 50 requests a second, 5, and some 600 requests take two minutes.
    package static let standard = NightlyAudit(sample: 300, maxShareOfRateLimit: 0.1)

    package init(sample: Int, maxShareOfRateLimit: Double) {
        self.sample = sample
        self.maxShareOfRateLimit = maxShareOfRateLimit
    }

    /// The pace of the audit's requests, per second: its share of the slower of the two endpoints
    /// it calls (Get All Subscription Statuses, Get Transaction History).
    package func requestsPerSecond(statuses: Double, transactionHistory: Double) -> Double {
        max(0.01, min(statuses, transactionHistory) * maxShareOfRateLimit)
    }
}
