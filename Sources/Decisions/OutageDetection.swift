package import AppStoreServerModel
package import Foundation

/// Finds when a server was not receiving notifications, from the first delivery attempts Apple
/// records. Pure: a list of failed first attempts in, windows out.
package enum OutageDetection {
    /// A notification's first delivery attempt that failed.
    package struct FailedAttempt: Hashable, Sendable {
        package var date: Date
        package var result: String
        package init(date: Date, result: String) {
            self.date = date
            self.result = result
        }
    }

    /// A stretch of time whose failed first attempts lie closer together than the gap.
    package struct DetectedOutage: Hashable, Sendable, Codable {
        /// The first and the last failed first attempt.
        package var firstFailure: Date
        package var lastFailure: Date
        package var notifications: Int
        /// How many of them failed with each `sendAttemptResult`.
        package var byResult: [String: Int]
        /// The window to recover: a margin either side, to the minute.
        package var recoveryStart: Date
        package var recoveryEnd: Date
    }

    /// Apple signs a notification and tries to send it at once; the margin covers the signing
    /// before the first attempt and clock differences.
    package static let margin: TimeInterval = 10 * 60

    /// Groups failed first attempts into outages: a new one starts after `gap` without a failure.
    package static func clusters(_ attempts: [FailedAttempt], gap: TimeInterval) -> [DetectedOutage] {
        var outages: [DetectedOutage] = []
        for attempt in attempts.sorted(by: { $0.date < $1.date }) {
            if var current = outages.last, attempt.date.timeIntervalSince(current.lastFailure) <= gap {
                current.lastFailure = attempt.date
                current.notifications += 1
                current.byResult[attempt.result, default: 0] += 1
                current.recoveryEnd = roundUp(attempt.date.addingTimeInterval(margin))
                outages[outages.count - 1] = current
            } else {
                outages.append(
                    DetectedOutage(
                        firstFailure: attempt.date, lastFailure: attempt.date, notifications: 1, byResult: [attempt.result: 1],
                        recoveryStart: roundDown(attempt.date.addingTimeInterval(-margin)), recoveryEnd: roundUp(attempt.date.addingTimeInterval(margin))
                    )
                )
            }
        }
        return outages
    }

    /// The failed first attempt of a history item, if its first attempt failed.
    package static func failedFirstAttempt(_ item: NotificationHistoryItem) -> FailedAttempt? {
        if let first = item.sendAttempts?.min(by: { $0.attemptDate < $1.attemptDate }) {
            guard first.sendAttemptResult != .success else { return nil }
            return FailedAttempt(date: Date(timeIntervalSince1970: Double(first.attemptDate) / 1000), result: first.sendAttemptResult.rawValue)
        }
        return nil
    }

    /// Parses a duration like `7d`, `36h`, `90m` (days at most the retention of history).
    package static func parseDuration(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let value = Double(text.dropLast()), value > 0 else { return nil }
        switch unit {
        case "d": return value * 86_400
        case "h": return value * 3_600
        case "m": return value * 60
        default: return nil
        }
    }

    static func roundDown(_ date: Date) -> Date { Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 60).rounded(.down) * 60) }
    static func roundUp(_ date: Date) -> Date { Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 60).rounded(.up) * 60) }
}
