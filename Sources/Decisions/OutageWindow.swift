import FailureKind
import Foundation
import SignedData

/// The stretch of time to recover: notifications signed in [start, end). Checked against what
/// Apple's history keeps before any request is made.
package struct OutageWindow: Hashable, Sendable {
    package var start: Date
    package var end: Date

    package var startMilliseconds: UnixMilliseconds { Int64((start.timeIntervalSince1970 * 1000).rounded()) }
    package var endMilliseconds: UnixMilliseconds { Int64((end.timeIntervalSince1970 * 1000).rounded()) }

    /// How long Get Notification History keeps notifications: about six months in Production,
    /// 30 days in Sandbox.
    package static func retentionDays(_ environment: AppStoreEnvironment) -> Int {
        environment == .production ? 180 : 30
    }

    /// Checks a window an operator asked for; the error says what is allowed.
    package init(start: Date, end: Date, environment: AppStoreEnvironment, now: Date = Date()) throws {
        let days = Self.retentionDays(environment)
        guard start < end else {
            throw WindowError(
                start == end
                    ? "the window is empty: --start and --end are the same time"
                    : "the window is reversed: --start (\(Self.format(start))) is after --end (\(Self.format(end)))"
            )
        }
        guard start < now else { throw WindowError("the window starts in the future (\(Self.format(start)))") }
        let earliest = now.addingTimeInterval(-Double(days) * 86_400)
        guard start >= earliest else {
            throw WindowError(
                "the window starts \(Self.format(start)), before what \(environment.rawValue) history keeps "
                    + "(\(days) days: nothing before \(Self.format(earliest))); use a later --start"
            )
        }
        self.start = start
        self.end = min(end, now)
    }

    /// Parses a time as ISO 8601 with an offset (`2026-11-18T02:00:00Z`, `…+01:00`, fractional
    /// seconds allowed) or as UNIX milliseconds.
    package static func parseTime(_ text: String) throws -> Date {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.allSatisfy(\.isNumber), let milliseconds = Int64(trimmed) {
            return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        }
        for style in [Date.ISO8601FormatStyle(), Date.ISO8601FormatStyle(includingFractionalSeconds: true)] {
            if let date = try? style.parse(trimmed) { return date }
        }
        throw WindowError("'\(trimmed.prefix(40))' is not a time: use ISO 8601 with an offset (2026-11-18T02:00:00Z) or UNIX milliseconds")
    }

    static func format(_ date: Date) -> String { date.formatted(.iso8601) }
}

package struct WindowError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

extension WindowError: KindedFailure {
    package var failureKind: FailureKind { .usage }
}
