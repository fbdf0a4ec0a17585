import Synchronization

/// Spaces the requests to one endpoint evenly at a fixed rate, for every task of the process
/// that shares it, so that a well-behaved run never meets a 429. Each caller reserves the next
/// free slot and sleeps until it; nobody holds the lock while waiting.
public final class RateLimiter: Sendable {
    public let requestsPerSecond: Double
    private let interval: Duration
    private let nextSlot = Mutex<ContinuousClock.Instant?>(nil)

    public init(requestsPerSecond: Double) {
        precondition(requestsPerSecond > 0, "a rate limit must be positive")
        self.requestsPerSecond = requestsPerSecond
        self.interval = .nanoseconds(Int64(1_000_000_000 / requestsPerSecond))
    }

    /// Waits for this caller's slot.
    public func acquire() async throws {
        let now = ContinuousClock.now
        let slot = nextSlot.withLock { next in
            let slot = max(now, next ?? now)
            next = slot + interval
            return slot
        }
        if slot > now { try await Task.sleep(until: slot, clock: .continuous) }
    }

    /// Holds every caller back until `instant` (Apple's `Retry-After`).
    public func pause(until instant: ContinuousClock.Instant) {
        nextSlot.withLock { next in next = max(next ?? instant, instant) }
    }
}
