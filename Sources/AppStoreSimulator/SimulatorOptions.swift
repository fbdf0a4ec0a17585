package import Foundation
package import SignedData

/// How the simulator behaves beyond Apple's rules: its limits, its faults, its credentials.
package struct SimulatorOptions: Sendable {
    /// Requests per second allowed per endpoint (Apple's figures are 50 in Production); nil: no limit.
    package var requestsPerSecond: Double?

    /// Apple's limits: 50 requests a second in Production for most endpoints, a tenth of it in
    /// Sandbox (each endpoint's share: `SimulatedAPI.rateShare`). What `simulate`,
    /// `simulate-deployment` and the demo enforce; in-process tests choose their own.
    package static func applesRateLimits(_ environment: AppStoreEnvironment) -> SimulatorOptions {
        var options = SimulatorOptions()
        options.requestsPerSecond = environment == .production ? 50 : 5
        return options
    }
    /// How long a pagination token stays usable before PaginationTokenExpiredError.
    package var paginationTokenLifetime: TimeInterval = 3600
    /// Share of requests answered 500 with GeneralInternalRetryableError (5000001).
    package var retryableErrorRate: Double = 0
    /// Added to every answer.
    package var latency: Duration = .zero
    /// Share of 200 answers whose body is cut short (a complete HTTP answer with half the JSON).
    package var truncatedBodyRate: Double = 0
    /// Share of 200 answers whose connection is dropped in the middle of the body.
    package var droppedConnectionRate: Double = 0
    /// Whether Request a Test Notification reaches the app's server.
    package var webhookReachable = true
    /// Notifications (by UUID) served with a byte of their signed payload altered, as if
    /// tampered with on the way: the reconciler must reject them.
    package var tamperedNotifications: Set<String> = []
    /// Notifications (by UUID) served as a bad payload of this kind: the reconciler must reject
    /// each with the matching reason (an unknown type it must accept and record).
    package var badPayloads: [String: BadPayload] = [:]
    /// The Get Notification History page at this index (from 0) says `hasMore` but carries no
    /// pagination token, once.
    package var hasMoreWithoutTokenAtPage: Int?
    /// Refuse, once, the pagination token that asks for this page (counting from 1 for the second
    /// page) as expired (4000017): a token that lapses in the middle of a window.
    package var expireTokenOnceAtPage: Int?
    /// When the page at this index (from 0) of an `onlyFailures` Get Notification History query
    /// is served, Apple's retries deliver the first `retriesDelivered` notifications of that
    /// query's list (a SUCCESS attempt at that moment), once: from then on they are no longer
    /// failures, and a query started afresh lists every later notification that many places
    /// earlier. A token already issued keeps paging the list it was issued for.
    package var retriesDeliveredAtPage: Int?
    package var retriesDelivered = 5
    /// After this many Get Notification History requests, Apple's clock runs this far ahead of
    /// the wall clock: a run that pages for hours, in seconds (Apple's 180-day limit moves while
    /// the run pages). A test gives the tool the same clock (`SimulatedAPI.clockAhead`).
    package var historyClockJump: (afterRequests: Int, seconds: TimeInterval)?
    /// Accounts (by index in the scenario) for which Get Transaction History and Get All
    /// Subscription Statuses answer this error instead (Apple's 4040001 AccountNotFoundError,
    /// 4000006 InvalidTransactionIdError, ...), whatever transaction ID of theirs is asked.
    package var failingAccounts: [Int: AccountFailure] = [:]
    /// How long after a 429 goes out a request to the same endpoint still counts as already on
    /// the wire rather than sent before the `Retry-After` (`requestsBeforeRetryAfter`).
    package var retryAfterGrace: TimeInterval = 0.1
    /// Seed of the fault injection, so a faulty run can be replayed.
    package var faultSeed: UInt64 = 7

    package init() {}
}

/// An answer the simulator is told to give to the next requests, whatever they ask: for tests
/// of one behaviour at a time (a 429, a retryable error, ...).
package enum InjectedAnswer: Sendable, Hashable {
    /// HTTP status with Apple's error body; `retryAfter` (epoch ms) adds the header.
    case error(status: Int, errorCode: Int64, message: String, retryAfterMilliseconds: Int64? = nil)
    /// A 200 whose body is not JSON.
    case garbage
    /// A 200 with this body (JSON of the wrong shape, say).
    case body(String)
    /// The request is handled as usual (an answer taken, say), and the connection drops before
    /// the reply is whole: the caller cannot tell whether it arrived.
    case dropAfterHandling
}

/// An error Apple answers for one account.
package struct AccountFailure: Sendable, Hashable {
    package var status: Int
    package var code: Int64
    package var message: String
    package init(status: Int, code: Int64, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    package static let accountNotFound = AccountFailure(status: 404, code: 4_040_001, message: "Account not found.")
    package static let invalidTransactionId = AccountFailure(status: 400, code: 4_000_006, message: "Invalid transaction id.")
}

/// A payload that must not be trusted, and how it is wrong.
package enum BadPayload: String, Sendable, Hashable, CaseIterable {
    /// A character of the signature altered on the way.
    case tampered
    /// Signed by a chain under another root than the configured one.
    case untrustedRoot
    /// A leaf certificate without Apple's marker extension.
    case leafWithoutAppleMarker
    /// A leaf that had expired when the payload was signed.
    case leafExpiredAtSignedDate
    /// For another bundle ID.
    case wrongBundle
    /// For another app (appAppleId; Production only).
    case wrongApp
    /// From the other environment.
    case wrongEnvironment
    /// Properly signed bytes that are not JSON.
    case malformedJSON
    /// Properly signed, and a megabyte long.
    case oversized
    /// Properly signed, of a notification type this tool does not know: to be accepted.
    case unknownType
}
