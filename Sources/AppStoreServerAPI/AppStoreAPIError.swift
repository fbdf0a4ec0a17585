public import Foundation
/// An error answer from the App Store Server API: the HTTP status and, when the body was
/// Apple's JSON error object, its `errorCode` and `errorMessage`. Unknown codes are kept.
/// The description never contains the bearer token or the key.
public struct AppStoreAPIError: Error, Hashable, Sendable, CustomStringConvertible {
    public var endpoint: Endpoint
    public var httpStatus: Int
    public var code: Code?
    public var message: String?
    /// For a 429: how long Apple asked to wait (from `Retry-After`).
    public var retryAfter: Duration?

    public init(endpoint: Endpoint, httpStatus: Int, code: Code?, message: String?, retryAfter: Duration? = nil) {
        self.endpoint = endpoint
        self.httpStatus = httpStatus
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// Apple's numeric error codes, as an extensible set of constants.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        public let rawValue: Int64
        public init(rawValue: Int64) { self.rawValue = rawValue }
        public var description: String { String(rawValue) }

        public static let generalBadRequest = Code(rawValue: 4_000_000)
        public static let invalidAppIdentifier = Code(rawValue: 4_000_002)
        public static let invalidRequestRevision = Code(rawValue: 4_000_005)
        public static let invalidTransactionId = Code(rawValue: 4_000_006)
        public static let startDateTooFarInPast = Code(rawValue: 4_000_012)
        public static let startDateAfterEndDate = Code(rawValue: 4_000_013)
        public static let invalidPaginationToken = Code(rawValue: 4_000_014)
        public static let invalidStartDate = Code(rawValue: 4_000_015)
        public static let invalidEndDate = Code(rawValue: 4_000_016)
        public static let paginationTokenExpired = Code(rawValue: 4_000_017)
        public static let invalidNotificationType = Code(rawValue: 4_000_018)
        public static let multipleFiltersSupplied = Code(rawValue: 4_000_019)
        public static let accountNotFound = Code(rawValue: 4_040_001)
        public static let accountNotFoundRetryable = Code(rawValue: 4_040_002)
        public static let appNotFound = Code(rawValue: 4_040_003)
        public static let appNotFoundRetryable = Code(rawValue: 4_040_004)
        public static let originalTransactionIdNotFound = Code(rawValue: 4_040_005)
        public static let originalTransactionIdNotFoundRetryable = Code(rawValue: 4_040_006)
        public static let serverNotificationURLNotFound = Code(rawValue: 4_040_007)
        public static let transactionIdNotFound = Code(rawValue: 4_040_010)
        public static let rateLimitExceeded = Code(rawValue: 4_290_000)
        public static let generalInternal = Code(rawValue: 5_000_000)
        public static let generalInternalRetryable = Code(rawValue: 5_000_001)

        /// Apple's "errors to retry" group.
        public var isRetryable: Bool {
            [.accountNotFoundRetryable, .appNotFoundRetryable, .originalTransactionIdNotFoundRetryable, .generalInternalRetryable]
                .contains(self)
        }
    }

    /// Worth sending again after a pause: Apple's retryable codes, 429, and the server-side
    /// statuses 500, 502, 503, 504. Other 4xx never are.
    public var isRetryable: Bool {
        if let code, code.isRetryable { return true }
        return [429, 500, 502, 503, 504].contains(httpStatus)
    }

    /// Apple refused the credentials (HTTP 401): the key, key ID, issuer ID or bundle ID is wrong.
    public var isCredentialsProblem: Bool { httpStatus == 401 }

    /// The pagination token can no longer be used: restart the query from its checkpoint.
    public var isPaginationTokenProblem: Bool { code == .paginationTokenExpired || code == .invalidPaginationToken }

    public var description: String {
        var text = "\(endpoint.name) answered HTTP \(httpStatus)"
        if let code { text += ", error \(code)" }
        if let message { text += ": \(message.prefix(200))" }
        if isCredentialsProblem {
            text += " (Apple rejected the credentials: check APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY and APPSTORE_BUNDLE_ID)"
        }
        return text
    }
}

/// A failure to get any answer, or an answer that is not what the API documents.
public struct AppStoreTransportError: Error, Hashable, Sendable, CustomStringConvertible {
    public var endpoint: Endpoint
    public var description: String
    /// Whether sending again may help (timeouts, refused or dropped connections).
    public var isRetryable: Bool
    /// How the attempt ended, for the endpoint's `RepeatRule`: a connection never made, one that
    /// failed after the request may have reached Apple, or a 2xx whose body is not the JSON.
    public var attemptEnd: RepeatRule.AttemptEnd

    public init(endpoint: Endpoint, description: String, isRetryable: Bool, attemptEnd: RepeatRule.AttemptEnd = .noAnswer(mayHaveArrived: true)) {
        self.endpoint = endpoint
        self.description = description
        self.isRetryable = isRetryable
        self.attemptEnd = attemptEnd
    }
}

/// A request that changes something at Apple may have been applied, and its endpoint's
/// `RepeatRule` forbids sending it again: the answer was lost after it may have arrived.
public struct OutcomeUnknown: Error, Hashable, Sendable, CustomStringConvertible {
    public var endpoint: Endpoint
    /// What became of the attempt.
    public var cause: String

    public init(endpoint: Endpoint, cause: String) {
        self.endpoint = endpoint
        self.cause = cause
    }

    public var description: String {
        "\(endpoint.name) may or may not have been applied (\(cause)); it was not sent again, since sending it twice could apply it twice"
    }
}

/// Apple's rate limit for an endpoint asks to wait longer than the run may
/// (`RetryPolicy.maximumRateLimitWait`): what is committed stays, and the run is to resume at
/// `resumeAt` (Apple's `Retry-After`).
public struct RateLimitedUntil: Error, Sendable, CustomStringConvertible {
    public var endpoint: Endpoint
    public var resumeAt: Date
    public var bound: Duration
    /// Whether an earlier attempt of the request may have reached Apple with its answer lost
    /// (only where the endpoint's `RepeatRule` let it be sent again after that).
    public var anyMayHaveArrived: Bool
    public init(endpoint: Endpoint, resumeAt: Date, bound: Duration, anyMayHaveArrived: Bool = false) {
        self.endpoint = endpoint
        self.resumeAt = resumeAt
        self.bound = bound
        self.anyMayHaveArrived = anyMayHaveArrived
    }
    public var description: String {
        "Apple's rate limit for \(endpoint.name) asks to wait until \(resumeAt.formatted(.iso8601)), beyond the \(bound.components.seconds / 60)-minute bound (--rate-limit-wait-minutes)"
    }
}

/// Retries ran out: the last failure, and how many attempts were made.
public struct RetriesExhausted: Error, Sendable, CustomStringConvertible {
    public var attempts: Int
    public var lastError: any Error
    /// Whether any attempt may have reached Apple with its answer lost (only where the endpoint's
    /// `RepeatRule` let it be sent again after that: the same `requestIdentifier`).
    public var anyMayHaveArrived = false
    public var description: String { "gave up after \(attempts) attempts: \(lastError)" }
}
