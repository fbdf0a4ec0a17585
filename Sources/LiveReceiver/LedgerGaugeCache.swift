import Foundation
import Ledger
import Synchronization

/// The ledger's figures `GET /metrics` shows (`LedgerGauges`), read at most once per `interval`
/// however many scrape: anyone who reaches the port can ask for /metrics, and each read takes a
/// connection of the pool the notifications are written through. One read at a time; a scrape
/// that comes while one is running, or within `interval` of the last, gets the last figures
/// (nil before the first read answered, or when the last one failed: left out of the page).
package final class LedgerGaugeCache: Sendable {
    package let interval: Duration
    private let state = Mutex(State())

    struct State {
        var figures: LedgerGauges?
        var readAt: ContinuousClock.Instant?
        var reading = false
    }

    package init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Whether a scrape at `now` reads the ledger: none is running and the last read (if any) is
    /// `interval` old. Claims the read when it says yes.
    func claim(at now: ContinuousClock.Instant) -> (read: Bool, last: LedgerGauges?) {
        state.withLock { state in
            let due = state.readAt.map { now - $0 >= interval } ?? true
            guard due, !state.reading else { return (false, state.figures) }
            state.reading = true
            return (true, state.figures)
        }
    }

    /// The figures a scrape shows: the last read's, or a new read's when one is due.
    package func figures(now: ContinuousClock.Instant = .now, read: @Sendable () async -> LedgerGauges?) async -> LedgerGauges? {
        let (due, last) = claim(at: now)
        guard due else { return last }
        let figures = await read()
        return state.withLock { state in
            state.reading = false
            state.readAt = now
            state.figures = figures
            return figures
        }
    }
}
