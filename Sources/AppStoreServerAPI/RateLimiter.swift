public import Clocks
import Synchronization

/// Spaces the requests to one endpoint evenly at a fixed rate, for every task of the process
/// that shares it, so that a well-behaved run never meets a 429. Each caller reserves the next
/// free slot and sleeps until it; nobody holds the lock while waiting.
///
/// A 429's `Retry-After` says when *the app* may next call the endpoint, so `pause(for:)`
/// holds back every caller, including those that reserved a slot before the 429 arrived: a
/// caller looks again when it wakes, and while a pause covers the present it waits for the end
/// of the pause and takes a fresh slot after it.
///
/// It keeps time by the clock it is given: the continuous clock in a run, a test's own clock in
/// tests (`ClientUnitTests`), so that its pacing and pauses are checked without waiting.
public final class RateLimiter: Sendable {
    public typealias Instant = AnyClock<Duration>.Instant
    public let requestsPerSecond: Double
    private let interval: Duration
    private let clock: AnyClock<Duration>
    private let schedule = Mutex(Schedule())

    private struct Schedule {
        /// The first instant not yet reserved.
        var nextSlot: Instant?
        /// No request may leave before this (the latest `Retry-After`).
        var pausedUntil: Instant?
    }

    public init(requestsPerSecond: Double, clock: AnyClock<Duration> = AnyClock(ContinuousClock())) {
        precondition(requestsPerSecond > 0, "a rate limit must be positive")
        self.requestsPerSecond = requestsPerSecond
        self.clock = clock
        self.interval = .nanoseconds(Int64(1_000_000_000 / requestsPerSecond))
    }

    /// Waits for this caller's slot, and past every pause that covers it; returns the instant,
    /// on the limiter's clock, at which it let the caller go (the one it checked the pauses at).
    @discardableResult
    public func acquire() async throws -> Instant {
        while true {
            let now = clock.now
            let slot = schedule.withLock { schedule in
                let slot = max(now, schedule.nextSlot ?? now, schedule.pausedUntil ?? now)
                schedule.nextSlot = slot.advanced(by: interval)
                return slot
            }
            if slot > now { try await clock.sleep(until: slot, tolerance: nil) }
            // A 429 answered while this caller slept may have paused the endpoint past its slot.
            // (The time first, then the pause: a pause told after this look is one this caller
            // left before.)
            let leaving = clock.now
            let pausedUntil = schedule.withLock { $0.pausedUntil }
            guard let pausedUntil, pausedUntil > leaving else { return leaving }
        }
    }

    /// Holds every caller back until `instant` (Apple's `Retry-After`), those already waiting
    /// for a slot included. Private: an `AnyClock`'s instants count from that wrapper's
    /// creation, so only one read from this limiter's own clock means anything here.
    private func pause(until instant: Instant) {
        schedule.withLock { schedule in
            schedule.pausedUntil = max(schedule.pausedUntil ?? instant, instant)
            schedule.nextSlot = max(schedule.nextSlot ?? instant, instant)
        }
    }

    /// The first instant no caller has reserved yet (nil before the first), for tests that must
    /// know every caller has taken its slot before they move their clock.
    package var firstFreeSlot: Instant? { schedule.withLock { $0.nextSlot } }

    /// Holds every caller back for `duration` from now on the limiter's clock (Apple's
    /// `Retry-After`), those already waiting for a slot included.
    public func pause(for duration: Duration) {
        pause(until: clock.now.advanced(by: duration))
    }
}
