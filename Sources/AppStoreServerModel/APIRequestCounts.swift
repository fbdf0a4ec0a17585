/// Counts of what the client did, for reports and metrics.
public struct APIRequestCounts: Hashable, Sendable, Codable {
    public var requests: [Endpoint: Int] = [:]
    public var rateLimited = 0
    public var retries = 0
    /// Answers by endpoint and HTTP status ("200", "429", ...; "transport_error" when no
    /// complete answer came): a bounded label set for metrics.
    public var answers: [Endpoint: [String: Int]] = [:]
    /// 429s by endpoint.
    public var rateLimitedByEndpoint: [Endpoint: Int] = [:]
    /// Retries by endpoint.
    public var retriesByEndpoint: [Endpoint: Int] = [:]

    public init() {}
}
