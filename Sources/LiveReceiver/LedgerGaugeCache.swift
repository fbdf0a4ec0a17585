import Foundation
import Ledger
import Synchronization

/// A read of the ledger that a public GET makes (`/metrics`' figures, `/healthz`'s migrations),
/// made at most once per `interval` however many ask: anyone who reaches the port can send those
/// GETs, and each read takes a connection of the pool the notifications are written through. One
/// read at a time; a request that comes while one is running, or within `interval` of the last,
/// gets the last value (nil before the first read answered, or when the last one failed; a failed
/// read is not kept for the interval: the next request reads again).
package final class LedgerReadCache<Value: Sendable>: Sendable {
    package let interval: Duration
    private let state = Mutex(State())

    struct State {
        var figures: Value?
        var readAt: ContinuousClock.Instant?
        var reading = false
    }

    package init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Whether a scrape at `now` reads the ledger: none is running and the last read (if any) is
    /// `interval` old. Claims the read when it says yes.
    func claim(at now: ContinuousClock.Instant) -> (read: Bool, last: Value?) {
        state.withLock { state in
            let due = state.readAt.map { now - $0 >= interval } ?? true
            guard due, !state.reading else { return (false, state.figures) }
            state.reading = true
            return (true, state.figures)
        }
    }

    /// The value a request gets: the last read's, or a new read's when one is due.
    package func figures(now: ContinuousClock.Instant = .now, read: @Sendable () async -> Value?) async -> Value? {
        let (due, last) = claim(at: now)
        guard due else { return last }
        let figures = await read()
        return state.withLock { state in
            state.reading = false
            // A failed read is not kept: the next request reads again (still one at a time).
            if figures != nil { state.readAt = now }
            state.figures = figures
            return figures
        }
    }
}

/// `/metrics`' figures from the ledger.
package typealias LedgerGaugeCache = LedgerReadCache<LedgerGauges>
