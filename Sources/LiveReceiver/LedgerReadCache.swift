import Foundation
package import Ledger
import Synchronization

/// A read of the ledger that a public GET makes (`/metrics`' figures and forwarding counts,
/// `/healthz`'s migrations), made at most once per `interval` however many ask: anyone who reaches
/// the port can send those GETs, and each read takes a connection of the pool the notifications
/// are written through. One read at a time; a request that comes while one is running, or within
/// `interval` of the last, gets the last value (nil before the first read answered). A failed read
/// (nil: the database did not answer in time) is kept for `retryAfterFailure`, shorter than
/// `interval`: the next read comes sooner, and an outage still costs at most one read per
/// `retryAfterFailure`. (A read that timed out may hold its connection until PostgreSQL answers:
/// at most about ⌈the read's time limit ÷ `retryAfterFailure`⌉ of them at once.)
package final class LedgerReadCache<Value: Sendable>: Sendable {
    package let interval: Duration
    package let retryAfterFailure: Duration
    private let state = Mutex(State())

    struct State {
        var value: Value?
        var readAt: ContinuousClock.Instant?
        var failed = false
        var reading = false
    }

    package init(interval: Duration = .seconds(10), retryAfterFailure: Duration = .seconds(1)) {
        self.interval = interval
        self.retryAfterFailure = min(interval, retryAfterFailure)
    }

    /// Whether a request at `now` reads the ledger: none is running and the last read (if any) is
    /// `interval` old (`retryAfterFailure` when it failed). Claims the read when it says yes.
    func claim(at now: ContinuousClock.Instant) -> (read: Bool, last: Value?) {
        state.withLock { state in
            let due = state.readAt.map { now - $0 >= (state.failed ? retryAfterFailure : interval) } ?? true
            guard due, !state.reading else { return (false, state.value) }
            state.reading = true
            return (true, state.value)
        }
    }

    /// The value a request gets: the last read's, or a new read's when one is due.
    package func value(now: ContinuousClock.Instant = .now, read: @Sendable () async -> Value?) async -> Value? {
        let (due, last) = claim(at: now)
        guard due else { return last }
        let value = await read()
        return state.withLock { state in
            state.reading = false
            state.readAt = now
            state.failed = value == nil
            state.value = value
            return value
        }
    }
}

/// `/metrics`' figures from the ledger.
package typealias LedgerGaugeCache = LedgerReadCache<LedgerGauges>
