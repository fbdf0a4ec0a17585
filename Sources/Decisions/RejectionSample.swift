package import Foundation

/// Which payloads that failed verification at `serve` are kept in `app_store.rejected_payloads`:
/// the first `keptPerHour` of each reason in each hour of the clock, and none after them (issue
/// 53: anyone can POST distinct garbage, or edit a genuine notification into any number of
/// distinct forgeries, and each was a row: 4,197 rows a second from 64 connections). What is not
/// kept is still answered 400 and counted, by reason, on /metrics. A sample per reason and hour
/// is what an operator reads a rejection for: what arrives, and since when.
package struct RejectionSample: Hashable, Sendable {
    package let keptPerHour: Int
    /// The hour counted (seconds since 1970, divided by 3,600) and how many of each reason were kept in it.
    package private(set) var hour: Int64 = .min
    package private(set) var kept: [String: Int] = [:]

    package init(keptPerHour: Int) {
        self.keptPerHour = max(0, keptPerHour)
    }

    /// Whether a payload rejected for `reason` at `date` is kept; counts it when it is.
    package mutating func keep(_ reason: String, at date: Date) -> Bool {
        let now = Int64((date.timeIntervalSince1970 / 3_600).rounded(.down))
        if now != hour {
            hour = now
            kept = [:]
        }
        let count = kept[reason, default: 0]
        guard count < keptPerHour else { return false }
        kept[reason] = count + 1
        return true
    }
}

/// How often `serve` logs a kind of answer that anyone can cause (a 400 for a forgery, a 503
/// when full): the first at once, then at most one line per `interval` for that kind, saying how
/// many it stood for (issue 53: distinct garbage wrote 10 MB of log in 20 s).
package struct LogThrottle: Hashable, Sendable {
    struct Entry: Hashable, Sendable {
        var at: ContinuousClock.Instant
        var suppressed: Int
    }

    package let interval: Duration
    private var last: [String: Entry] = [:]

    package init(interval: Duration) {
        self.interval = interval
    }

    /// Nil: stay silent; else log now, for this one and the returned number of others since the last line.
    package mutating func note(_ kind: String, at now: ContinuousClock.Instant) -> Int? {
        if var previous = last[kind], now - previous.at < interval {
            previous.suppressed += 1
            last[kind] = previous
            return nil
        }
        let suppressed = last[kind]?.suppressed ?? 0
        last[kind] = Entry(at: now, suppressed: 0)
        return suppressed
    }
}
