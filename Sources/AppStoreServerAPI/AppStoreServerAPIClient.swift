public import AsyncHTTPClient
public import Clocks
@_exported import AppStoreServerModel
public import Foundation
public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
public import SignedData
import Synchronization

/// How the client talks to Apple.
public struct AppStoreServerAPIConfiguration: Sendable {
    public var credentials: APICredentials
    public var environment: AppStoreEnvironment
    public var baseURL: APIBaseURL
    /// Requests per second per endpoint; Apple's documented limits by default (sandbox: 10%).
    public var requestsPerSecond: [Endpoint: Double]
    public var retryPolicy: RetryPolicy
    /// Deadline of one request, connection included.
    public var requestTimeout: Duration
    /// Larger answers are refused (Apple's pages are 20 items).
    public var maximumResponseBytes: Int
    /// What the rate limiters, the retry budget and the waits between attempts keep time by: the
    /// continuous clock, or a test's own.
    public var clock: AnyClock<Duration>

    public init(
        credentials: APICredentials, environment: AppStoreEnvironment, baseURL: APIBaseURL? = nil,
        requestsPerSecond: [Endpoint: Double] = [:], retryPolicy: RetryPolicy = RetryPolicy(),
        requestTimeout: Duration = .seconds(30), maximumResponseBytes: Int = 16 * 1024 * 1024,
        clock: AnyClock<Duration> = AnyClock(ContinuousClock())
    ) {
        self.credentials = credentials
        self.environment = environment
        self.baseURL = baseURL ?? .apple(environment)
        var rates: [Endpoint: Double] = [:]
        for endpoint in Endpoint.allCases {
            rates[endpoint] = requestsPerSecond[endpoint]
                ?? endpoint.productionRequestsPerSecond * (environment == .production ? 1 : 0.1)
        }
        self.requestsPerSecond = rates
        self.retryPolicy = retryPolicy
        self.requestTimeout = requestTimeout
        self.maximumResponseBytes = maximumResponseBytes
        self.clock = clock
    }
}

/// The App Store Server API client: JWT bearer authentication, a rate limiter per endpoint shared
/// by every caller, retries with backoff for what Apple says to retry (and `Retry-After` for
/// 429), typed errors. The paging endpoints are async sequences of pages so that callers set the
/// pace and checkpoint between pages.
public final class AppStoreServerAPIClient: Sendable {
    public let configuration: AppStoreServerAPIConfiguration
    private let httpClient: HTTPClient
    private let tokens: BearerTokenIssuer
    private let limiters: [Endpoint: RateLimiter]
    private let logger: Logger
    private let counters = CountersBox()

    public init(configuration: AppStoreServerAPIConfiguration, httpClient: HTTPClient = .shared, logger: Logger) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.tokens = BearerTokenIssuer(credentials: configuration.credentials)
        self.limiters = Dictionary(
            uniqueKeysWithValues: Endpoint.allCases.map { ($0, RateLimiter(requestsPerSecond: configuration.requestsPerSecond[$0]!, clock: configuration.clock)) }
        )
        self.logger = logger
    }

    public var counts: APIRequestCounts { counters.value }

    // MARK: - Endpoints

    /// Get Notification History for one query, page by page, with the identical body each time.
    /// - Parameter paginationToken: resume after a page already processed (a checkpoint).
    public func notificationHistory(_ request: NotificationHistoryRequest, resumingAfter paginationToken: String? = nil) -> NotificationHistoryPages {
        NotificationHistoryPages(firstCursor: paginationToken, endpoint: .notificationHistory, cursorName: "paginationToken") { token in
            let response = try await self.notificationHistoryPage(request, paginationToken: token)
            return (NotificationHistoryPage(response: response, requestedWith: token), response.hasMore, response.paginationToken)
        }
    }

    /// One page of Get Notification History.
    public func notificationHistoryPage(_ request: NotificationHistoryRequest, paginationToken: String?) async throws -> NotificationHistoryResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body = try encoder.encode(request)
        let query = paginationToken.map { [("paginationToken", $0)] } ?? []
        return try await send(
            .notificationHistory, method: .POST, path: "/inApps/v1/notifications/history", query: query, body: Array(body),
            decoding: NotificationHistoryResponse.self
        )
    }

    /// Get Transaction History v2 for a customer (any of their transaction IDs), page by page.
    /// - Parameter revision: start from a stored revision (only changes since) or nil (everything).
    public func transactionHistory(transactionId: String, query: TransactionHistoryQuery = TransactionHistoryQuery(), startingAt revision: String? = nil) -> TransactionHistoryPages {
        TransactionHistoryPages(firstCursor: revision, endpoint: .transactionHistory, cursorName: "revision") { revision in
            let page = try await self.transactionHistoryPage(transactionId: transactionId, query: query, revision: revision)
            return (page, page.hasMore, page.revision)
        }
    }

    /// One page of Get Transaction History v2.
    public func transactionHistoryPage(transactionId: String, query: TransactionHistoryQuery, revision: String?) async throws -> HistoryResponse {
        try await send(
            .transactionHistory, method: .GET, path: "/inApps/v2/history/\(try Self.pathComponent(transactionId))",
            query: query.queryItems(revision: revision), body: nil, decoding: HistoryResponse.self
        )
    }

    /// Get All Subscription Statuses for a customer (any of their transaction IDs).
    public func allSubscriptionStatuses(transactionId: String, status: [SubscriptionStatus] = []) async throws -> StatusResponse {
        try await send(
            .subscriptionStatuses, method: .GET, path: "/inApps/v1/subscriptions/\(try Self.pathComponent(transactionId))",
            query: status.map { ("status", String($0.rawValue)) }, body: nil, decoding: StatusResponse.self
        )
    }

    /// Look Up Order ID: the purchases of the order ID on a customer's emailed receipt. Apple
    /// serves it in Production only (no Sandbox URL): callers refuse Sandbox before asking.
    public func lookUpOrderId(_ orderId: String) async throws -> OrderLookupResponse {
        try await send(
            .lookUpOrderId, method: .GET, path: "/inApps/v1/lookup/\(try Self.pathComponent(orderId))", query: [], body: nil,
            decoding: OrderLookupResponse.self
        )
    }

    /// Request a Test Notification: Apple sends a TEST notification to the configured URL.
    public func requestTestNotification() async throws -> SendTestNotificationResponse {
        try await send(
            .requestTestNotification, method: .POST, path: "/inApps/v1/notifications/test", query: [], body: nil,
            decoding: SendTestNotificationResponse.self
        )
    }

    /// Get Test Notification Status: whether the test notification reached the server.
    public func testNotificationStatus(token: String) async throws -> CheckTestNotificationResponse {
        try await send(
            .testNotificationStatus, method: .GET, path: "/inApps/v1/notifications/test/\(try Self.pathComponent(token))", query: [],
            body: nil, decoding: CheckTestNotificationResponse.self
        )
    }

    /// Send Consumption Information (version 2): the team's answer to a refund request, for the
    /// transaction its CONSUMPTION_REQUEST names. Apple answers 202 with no body. Sent again
    /// within the call only where `Endpoint.repeatRule` allows: an answer lost after the request
    /// may have arrived is `OutcomeUnknown`. Returns Apple's status.
    @discardableResult
    public func sendConsumptionInformation(transactionId: String, _ information: ConsumptionInformation) async throws -> Int {
        let body = try JSONEncoder().encode(information)
        return try await exchange(
            .sendConsumptionInformation, method: .PUT, path: "/inApps/v2/transactions/consumption/\(try Self.pathComponent(transactionId))",
            query: [], body: Array(body), decoding: NoContent.self
        ).status
    }

    /// Extend a Subscription Renewal Date for one subscription. Sent again within the call
    /// whatever became of an attempt (`RepeatRule.sameRequestIdentifier`): the body's
    /// requestIdentifier makes Apple extend once.
    public func extendRenewalDate(originalTransactionId: String, _ request: ExtendRenewalDateRequest) async throws -> ExtendRenewalDateResponse {
        try await send(
            .extendRenewalDate, method: .PUT, path: "/inApps/v1/subscriptions/extend/\(try Self.pathComponent(originalTransactionId))",
            query: [], body: Array(try JSONEncoder().encode(request)), decoding: ExtendRenewalDateResponse.self
        )
    }

    /// Extend Subscription Renewal Dates for All Active Subscribers of one product: Apple takes
    /// it and works through the subscribers over hours or days (follow it with
    /// `massExtensionStatus`).
    public func massExtendRenewalDate(_ request: MassExtendRenewalDateRequest) async throws -> MassExtendRenewalDateResponse {
        try await send(
            .massExtendRenewalDate, method: .POST, path: "/inApps/v1/subscriptions/extend/mass", query: [],
            body: Array(try JSONEncoder().encode(request)), decoding: MassExtendRenewalDateResponse.self
        )
    }

    /// Get Status of Subscription Renewal Date Extensions: whether a mass extension is complete,
    /// and then its counts.
    public func massExtensionStatus(productId: String, requestIdentifier: String) async throws -> MassExtendRenewalDateStatusResponse {
        try await send(
            .massExtensionStatus, method: .GET,
            path: "/inApps/v1/subscriptions/extend/mass/\(try Self.pathComponent(productId))/\(try Self.pathComponent(requestIdentifier))",
            query: [], body: nil, decoding: MassExtendRenewalDateStatusResponse.self
        )
    }

    // MARK: - Requests

    /// Sends one request under the endpoint's rate limit, retrying what may be retried.
    /// A 200 whose body is not the documented JSON (truncated, an HTML error page) counts as an
    /// incomplete answer and is retried like a dropped connection.
    func send<Value: Decodable>(
        _ endpoint: Endpoint, method: HTTPMethod, path: String, query: [(String, String)], body: [UInt8]?, decoding type: Value.Type
    ) async throws -> Value {
        try await exchange(endpoint, method: method, path: path, query: query, body: body, decoding: type).value
    }

    /// `send`, with the HTTP status of Apple's successful answer (202 for an answer Apple takes
    /// to process later).
    func exchange<Value: Decodable>(
        _ endpoint: Endpoint, method: HTTPMethod, path: String, query: [(String, String)], body: [UInt8]?, decoding type: Value.Type
    ) async throws -> (value: Value, status: Int) {
        let policy = configuration.retryPolicy
        let clock = configuration.clock
        // The retry budget counts from the first attempt's departure, not from the queue before
        // it: a request that waited out another's 429 (up to an hour) starts with its whole budget.
        var started: AnyClock<Duration>.Instant?
        var attempt = 0
        var rateLimitWaited = Duration.zero
        // Whether an attempt sent again under the endpoint's rule may have reached Apple.
        var anyMayHaveArrived = false
        while true {
            attempt += 1
            try await limiters[endpoint]!.acquire()
            if started == nil { started = clock.now }
            let failure: any Error
            var wait: Duration?
            do {
                counters.update { $0.requests[endpoint, default: 0] += 1 }
                let (status, bytes) = try await sendOnce(endpoint, method: method, path: path, query: query, body: body)
                let value = try decode(type, from: bytes, endpoint: endpoint)
                counters.update { $0.answers[endpoint, default: [:]][String(status), default: 0] += 1 }
                return (value, status)
            } catch let error as AppStoreAPIError {
                failure = error
                counters.update { $0.answers[endpoint, default: [:]][String(error.httpStatus), default: 0] += 1 }
                if error.httpStatus == 429 {
                    counters.update {
                        $0.rateLimited += 1
                        $0.rateLimitedByEndpoint[endpoint, default: 0] += 1
                    }
                    wait = error.retryAfter ?? policy.delay(afterAttempt: attempt)
                } else if !error.isRetryable || !endpoint.repeatRule.mayRepeat(after: .refused(status: error.httpStatus)) {
                    throw error
                }
            } catch let error as AppStoreTransportError {
                counters.update { $0.answers[endpoint, default: [:]]["transport_error", default: 0] += 1 }
                guard error.isRetryable else { throw error }
                // An endpoint that changes things is sent again only where its rule allows.
                guard endpoint.repeatRule.mayRepeat(after: error.attemptEnd) else {
                    throw OutcomeUnknown(endpoint: endpoint, cause: error.description)
                }
                if error.attemptEnd != .noAnswer(mayHaveArrived: false) { anyMayHaveArrived = true }
                failure = error
            }
            let pause = wait ?? policy.delay(afterAttempt: attempt)
            // A 429 whose Retry-After lies beyond what is left of the retry budget: Apple limits
            // per hour. Within the bound, wait for it and go on with a fresh budget; beyond it,
            // stop and say when to resume (what was committed stays).
            if let wait, started!.duration(to: clock.now) + wait >= policy.maximumTotal {
                guard case .wait = policy.rateLimited(retryAfter: wait, waited: rateLimitWaited) else {
                    throw RateLimitedUntil(
                        endpoint: endpoint, resumeAt: Date().addingTimeInterval(Double(wait / .milliseconds(1)) / 1000), bound: policy.maximumRateLimitWait,
                        anyMayHaveArrived: anyMayHaveArrived
                    )
                }
                rateLimitWaited += wait
                attempt = 0
                started = clock.now.advanced(by: wait)
            }
            let elapsed = started!.duration(to: clock.now)
            guard attempt < policy.maximumAttempts, elapsed + pause < policy.maximumTotal else {
                throw RetriesExhausted(attempts: attempt, lastError: failure, anyMayHaveArrived: anyMayHaveArrived)
            }
            counters.update {
                $0.retries += 1
                $0.retriesByEndpoint[endpoint, default: 0] += 1
            }
            logger.notice(
                "retrying",
                metadata: ["endpoint": "\(endpoint.name)", "attempt": "\(attempt)", "after": "\(pause)", "error": "\(failure)"]
            )
            if wait != nil { limiters[endpoint]!.pause(for: pause) }
            try await clock.sleep(for: pause)
        }
    }

    private func sendOnce(_ endpoint: Endpoint, method: HTTPMethod, path: String, query: [(String, String)], body: [UInt8]?) async throws -> (status: Int, bytes: [UInt8]) {
        var request = HTTPClientRequest(url: configuration.baseURL.url + path + Self.queryString(query))
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(try tokens.token())")
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: "appstore-reconcile")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response: HTTPClientResponse
        let collected: ByteBuffer
        do {
            response = try await httpClient.execute(request, timeout: .nanoseconds(Int64(configuration.requestTimeout / .nanoseconds(1))))
            collected = try await response.body.collect(upTo: configuration.maximumResponseBytes)
        } catch let error as NIOTooManyBytesError {
            throw AppStoreTransportError(endpoint: endpoint, description: "the answer exceeded \(configuration.maximumResponseBytes) bytes (\(error))", isRetryable: false)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // Timeouts, refused or dropped connections, truncated bodies: worth another try.
            throw AppStoreTransportError(
                endpoint: endpoint, description: "no complete answer from \(configuration.baseURL): \(error)", isRetryable: true,
                attemptEnd: .noAnswer(mayHaveArrived: !Self.neverConnected(error))
            )
        }
        let bytes = Array(collected.readableBytesView)
        guard (200..<300).contains(Int(response.status.code)) else {
            throw Self.apiError(endpoint: endpoint, status: Int(response.status.code), headers: response.headers, body: bytes)
        }
        return (Int(response.status.code), bytes)
    }

    static func apiError(endpoint: Endpoint, status: Int, headers: HTTPHeaders, body: [UInt8]) -> AppStoreAPIError {
        struct ErrorBody: Decodable {
            var errorCode: Int64?
            var errorMessage: String?
        }
        let parsed = try? JSONDecoder().decode(ErrorBody.self, from: Data(body))
        var error = AppStoreAPIError(endpoint: endpoint, httpStatus: status, code: parsed?.errorCode.map(AppStoreAPIError.Code.init(rawValue:)), message: parsed?.errorMessage)
        if status == 429 { error.retryAfter = retryAfter(headers.first(name: "Retry-After")) }
        return error
    }

    /// Apple sends `Retry-After` as the UNIX time in milliseconds when requests may resume;
    /// a small number is taken as a delay in seconds (RFC 9110's form), defensively.
    public static func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value, let number = Double(value.trimmingCharacters(in: .whitespaces)), number >= 0 else { return nil }
        if number > 100_000_000_000 {
            // Rounded up: a request never leaves before the time Apple gave.
            let milliseconds = number - now.timeIntervalSince1970 * 1000
            return .milliseconds(Int64(max(0, milliseconds).rounded(.up)))
        }
        return .milliseconds(Int64(number * 1000))
    }

    private func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8], endpoint: Endpoint) throws -> Value {
        // An endpoint that answers with a status alone (Send Consumption Information's 202).
        if let none = NoContent() as? Value { return none }
        do {
            return try JSONDecoder().decode(type, from: Data(bytes))
        } catch {
            // A 200 whose body is not the documented JSON: truncated, or not JSON at all.
            throw AppStoreTransportError(
                endpoint: endpoint, description: "the answer is not the documented JSON (\(bytes.count) bytes)", isRetryable: true,
                attemptEnd: .unreadableSuccess
            )
        }
    }

    /// Whether `error` says the request never left: no connection was made (refused, the connect
    /// timed out, none came free in the pool). Anything else may have reached Apple.
    package static func neverConnected(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPClientError: [.connectTimeout, .getConnectionFromPoolTimeout].contains(error)
        case is NIOConnectionError: true
        case let error as ChannelError: if case .connectTimeout = error { true } else { false }
        case let error as IOError: error.errnoCode == ECONNREFUSED
        default: false
        }
    }

    static func pathComponent(_ value: String) throws -> String {
        guard !value.isEmpty, let encoded = value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-_."))) else {
            throw AppStoreTransportError(endpoint: .transactionHistory, description: "an empty identifier", isRetryable: false)
        }
        return encoded
    }

    static func queryString(_ items: [(String, String)]) -> String {
        guard !items.isEmpty else { return "" }
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_.~"))
        return "?" + items.map { name, value in
            "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)"
        }.joined(separator: "&")
    }
}

/// The client's counters, updated from any task.
final class CountersBox: Sendable {
    private let counts = Mutex(APIRequestCounts())
    var value: APIRequestCounts { counts.withLock { $0 } }
    func update(_ change: (inout APIRequestCounts) -> Void) { counts.withLock { change(&$0) } }
}

/// The answer of an endpoint that says everything with its status (202 Accepted): its body,
/// if any, is not read.
struct NoContent: Decodable, Sendable {
    init() {}
}
