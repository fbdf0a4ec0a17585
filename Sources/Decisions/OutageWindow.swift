package import FailureKind
package import Foundation
package import SignedData

/// The stretch of time to recover: notifications signed in [start, end). Checked against what
/// Apple's history keeps before any request is made.
package struct OutageWindow: Hashable, Sendable {
    package var start: Date
    package var end: Date
    /// The start asked for: later than `start` never; earlier when the window was clamped to
    /// what Apple's history will still hold when the run's last query is sent (`retentionMargin`).
    /// Checkpoints are kept under it, so that a resumed run of the same window finds them.
    package var requestedStart: Date

    /// The start was moved later than asked (`requestedStart`).
    package var isClamped: Bool { Self.milliseconds(requestedStart) != startMilliseconds }

    package var startMilliseconds: UnixMilliseconds { Self.milliseconds(start) }
    package var endMilliseconds: UnixMilliseconds { Self.milliseconds(end) }

    package static func milliseconds(_ date: Date) -> UnixMilliseconds { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// How long Get Notification History keeps notifications: about six months in Production,
    /// 30 days in Sandbox.
    package static func retentionDays(_ environment: AppStoreEnvironment) -> Int {
        environment == .production ? 180 : 30
    }

    /// How long before Apple's limit a window's start is kept: a run sends its last query
    /// (the unfiltered pass, a restart after a refused token) minutes or hours after its first,
    /// and Apple checks every query's start against its own clock (StartDateTooFarInPastError,
    /// 4000012, not retryable). A start within this of the limit is moved to it, with a warning.
    package static let retentionMargin: TimeInterval = 3600

    /// The earliest start a window asked for at `now` keeps: the limit of what Apple's history
    /// holds, plus `retentionMargin`.
    package static func earliestStart(_ environment: AppStoreEnvironment, now: Date) -> Date {
        now.addingTimeInterval(-Double(retentionDays(environment)) * 86_400 + retentionMargin)
    }

    /// Checks a window an operator asked for; the error says what is allowed. A start before
    /// what Apple's history keeps is refused; one within `retentionMargin` of that limit is moved
    /// to it (`isClamped`): the notifications signed in between leave Apple's history while
    /// the run pages, and no query could fetch them. `resuming`: the window of an unfinished run
    /// (its checkpoints exist), whose start Apple's limit may have overtaken since: clamped too,
    /// never refused, so that the run can finish what Apple still holds.
    package init(start: Date, end: Date, environment: AppStoreEnvironment, now: Date = Date(), resuming: Bool = false) throws {
        let days = Self.retentionDays(environment)
        guard start < end else {
            throw WindowError(
                start == end
                    ? "the window is empty: --start and --end are the same time"
                    : "the window is reversed: --start (\(Self.format(start))) is after --end (\(Self.format(end)))"
            )
        }
        guard start < now else { throw WindowError("the window starts in the future (\(Self.format(start)))") }
        let limit = now.addingTimeInterval(-Double(days) * 86_400)
        let earliest = Self.earliestStart(environment, now: now)
        guard start >= limit || resuming else {
            throw WindowError(
                "the window starts \(Self.format(start)), before what \(environment.rawValue) history keeps "
                    + "(\(days) days: nothing before \(Self.format(limit))); use --start \(Self.format(earliest)) or later"
            )
        }
        guard end > earliest else {
            throw WindowError(
                "the window ends \(Self.format(end)), within the hour before what \(environment.rawValue) history keeps "
                    + "(\(days) days: nothing before \(Self.format(limit))): its notifications leave Apple's history before a run could page them"
            )
        }
        self.requestedStart = start
        self.start = max(start, earliest)
        self.end = min(end, now)
    }

    /// The window's start moved to `earliestStart` at `now`, for a run that is still paging when
    /// Apple's limit reaches its start: nil when the start is still later than that.
    package func movedPastRetention(_ environment: AppStoreEnvironment, now: Date) -> OutageWindow? {
        let earliest = Self.earliestStart(environment, now: now)
        guard start < earliest, earliest < end else { return nil }
        var moved = self
        moved.start = earliest
        return moved
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

    package static func format(_ date: Date) -> String { date.formatted(.iso8601) }
}

package struct WindowError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

extension WindowError: KindedFailure {
    package var failureKind: FailureKind { .usage }
}
