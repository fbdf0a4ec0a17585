/// How failed requests are retried: exponential backoff with full jitter, bounded by a number
/// of attempts and a total time. 429 waits for Apple's `Retry-After` instead of the backoff.
public struct RetryPolicy: Hashable, Sendable {
    public var maximumAttempts: Int
    public var initialDelay: Duration
    public var maximumDelay: Duration
    /// No new attempt starts later than this after the first.
    public var maximumTotal: Duration

    public init(
        maximumAttempts: Int = 6, initialDelay: Duration = .milliseconds(200), maximumDelay: Duration = .seconds(20),
        maximumTotal: Duration = .seconds(120)
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.maximumTotal = maximumTotal
    }

    /// The pause before attempt `attempt + 1` (attempt counts from 1): a random time up to
    /// `initialDelay · 2^(attempt-1)`, capped by `maximumDelay`.
    public func delay(afterAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(initialDelay * (1 << exponent), maximumDelay)
        return ceiling * random
    }
}
