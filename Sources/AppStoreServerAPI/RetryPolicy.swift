/// How failed requests are retried: exponential backoff with full jitter, bounded by a number
/// of attempts and a total time. 429 waits for Apple's `Retry-After` instead of the backoff.
public struct RetryPolicy: Hashable, Sendable {
    public var maximumAttempts: Int
    public var initialDelay: Duration
    public var maximumDelay: Duration
    /// No new attempt starts later than this after the first.
    public var maximumTotal: Duration
    /// How long a request may wait, in all, for the times Apple's 429s give in `Retry-After`.
    /// Apple enforces its rate limits per hour, so a 429 may name a time far beyond
    /// `maximumTotal`: within this bound the request waits (with the endpoint's other requests)
    /// and goes on, outside the attempts and `maximumTotal`; beyond it, it stops with
    /// `RateLimitedUntil`, which says when to resume.
    public var maximumRateLimitWait: Duration

    public init(
        maximumAttempts: Int = 6, initialDelay: Duration = .milliseconds(200), maximumDelay: Duration = .seconds(20),
        maximumTotal: Duration = .seconds(120), maximumRateLimitWait: Duration = .seconds(3600)
    ) {
        self.maximumRateLimitWait = maximumRateLimitWait
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.maximumTotal = maximumTotal
    }

    /// What to do with a 429 that asks to wait `retryAfter`, after `waited` so far on 429s:
    /// wait (within `maximumRateLimitWait` in all), or stop.
    public func rateLimited(retryAfter: Duration, waited: Duration) -> RateLimitDecision {
        waited + retryAfter <= maximumRateLimitWait ? .wait(retryAfter) : .stop
    }

    /// The pause before attempt `attempt + 1` (attempt counts from 1): a random time up to
    /// `initialDelay · 2^(attempt-1)`, capped by `maximumDelay`.
    public func delay(afterAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(initialDelay * (1 << exponent), maximumDelay)
        return ceiling * random
    }
}

/// What a request does on a 429 (`RetryPolicy.rateLimited`).
public enum RateLimitDecision: Hashable, Sendable {
    /// Wait this long, then try again.
    case wait(Duration)
    /// Stop: the wait is beyond the bound (`RateLimitedUntil`).
    case stop
}
