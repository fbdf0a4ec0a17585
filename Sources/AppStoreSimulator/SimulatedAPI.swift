import Crypto
package import Foundation
package import SignedData
import Synchronization

/// The App Store Server API as the simulator implements it, without HTTP: a request in, an
/// answer out. It follows Apple's documented behaviour, including the easily missed parts:
/// a type filter without a subtype matches only notifications without one; pagination tokens
/// are bound to the request body and expire; `Retry-After` is an epoch time in milliseconds.
package final class SimulatedAPI: Sendable {
    package struct Answer: Sendable {
        package var status: Int
        package var headers: [(String, String)]
        package var body: [UInt8]
        /// The HTTP shell sends half the body, then closes the connection.
        package var dropMidBody = false

        static func json(_ value: some Encodable, status: Int = 200) -> Answer {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return Answer(status: status, headers: [("Content-Type", "application/json")], body: Array((try? encoder.encode(value)) ?? Data()))
        }

        static func json(_ text: JSONText, status: Int = 200) -> Answer {
            Answer(status: status, headers: [("Content-Type", "application/json")], body: text.bytes)
        }

        static func error(_ status: Int, _ code: Int64, _ message: String, headers: [(String, String)] = []) -> Answer {
            let body = "{\"errorCode\":\(code),\"errorMessage\":\"\(message)\"}"
            return Answer(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(body.utf8))
        }

        init(status: Int, headers: [(String, String)], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    package let scenario: Scenario
    package let options: SimulatorOptions
    package let credentials: SimulatorCredentials
    package let pki: TestPKI
    let signer: JWSSigner
    let state: Mutex<State>
    /// Signed notifications kept by `presign()`, by UUID.
    let presigned = Mutex<[String: String]>([:])
    /// Look Up Order ID's index, order ID → transaction ID, made at the first look-up.
    let orders = Mutex<[String: [String]]?>(nil)

    struct State {
        var injected: [InjectedAnswer] = []
        /// Answers for the next requests to one endpoint (by `Route.endpointName`), in order.
        var injectedByEndpoint: [String: [InjectedAnswer]] = [:]
        var buckets: [String: (tokens: Double, updated: Date)] = [:]
        var random: SeededGenerator
        var requestCounts: [String: Int] = [:]
        var rateLimited = 0
        var firstRequest: Date?
        var lastRateLimited: Date?
        var testNotifications: [String: TestNotification] = [:]
        /// Where Request a Test Notification delivers (`deliverTestNotifications(to:)`); nil:
        /// nowhere, and `SimulatorOptions.webhookReachable` decides the result.
        var webhookURL: String?
        var transactionHistoryRequests: [(id: String, revision: String?)] = []
        var subscriptionStatusesRequests: [String] = []
        /// The `Retry-After`s each endpoint answered that still hold: when each went out, and until when.
        var retryAfter: [String: [(answeredAt: Date, until: Date)]] = [:]
        var requestsBeforeRetryAfter: [RequestBeforeRetryAfter] = []
        var expiredTokenServed = false
        var tokenlessPageServed = false
        /// Get Notification History matches by request body (see `notificationHistory`).
        var queryMatches: [String: [Int]] = [:]
        /// Deliveries Apple's retries made while a query paged (`retriesDeliveredAtPage`):
        /// notification index → when.
        var retriedDeliveries: [Int: Int64] = [:]
        var retriesDeliveredServed = false
        /// Get Notification History requests answered (`historyClockJump`).
        var historyRequests = 0
        /// Send Consumption Information's answers taken.
        var consumptionAnswers: [ConsumptionAnswerTaken] = []
        /// Notifications Apple signed after the scenario was made, in reply to what the tool
        /// sent (a REFUND_DECLINED after an answer): indexed after the scenario's own.
        var signedLater: [Scenario.Notification] = []
        /// Renewal-date extensions made, in order, and the mass extensions by requestIdentifier.
        var extensions: [RenewalExtensionTaken] = []
        var massExtensions: [String: MassExtension] = [:]
    }

    package init(scenario: Scenario, options: SimulatorOptions = SimulatorOptions(), credentials: SimulatorCredentials = SimulatorCredentials(), pki: TestPKI? = nil) throws {
        self.scenario = scenario
        self.options = options
        self.credentials = credentials
        let pki = try pki ?? TestPKI(TestPKI.Options(referenceTime: scenario.configuration.now))
        self.pki = pki
        self.signer = try pki.signer()
        self.state = Mutex(State(random: SeededGenerator(seed: options.faultSeed)))
    }

    /// Makes the next requests (any endpoint) get these answers, in order.
    package func inject(_ answers: [InjectedAnswer]) {
        state.withLock { $0.injected += answers }
    }

    /// Makes the next requests to one endpoint (`sendConsumptionInformation`, say) get these
    /// answers, in order; the other endpoints are answered as usual.
    package func inject(_ answers: [InjectedAnswer], endpoint: String) {
        state.withLock { $0.injectedByEndpoint[endpoint, default: []] += answers }
    }

    /// Requests served per endpoint path prefix, and how many were refused with 429.
    package var requestCounts: [String: Int] { state.withLock { $0.requestCounts } }
    /// A test notification Apple sent: when, its signed payload (one notificationUUID for every
    /// status answer), and its delivery's result once known.
    struct TestNotification {
        var sent: Date
        var signedPayload: String
        var result: String?
    }

    /// Makes Request a Test Notification POST the signed TEST notification to `url`, as Apple
    /// POSTs it to the Server URL set in App Store Connect; Get Test Notification Status then
    /// reports SUCCESS only for a 2xx answer.
    package func deliverTestNotifications(to url: String?) {
        state.withLock { $0.webhookURL = url }
    }

    /// How far Apple's clock runs ahead of the wall clock now (`historyClockJump`).
    package var clockAhead: TimeInterval { state.withLock { Self.clockAhead(afterHistoryRequests: $0.historyRequests, options) } }

    static func clockAhead(afterHistoryRequests requests: Int, _ options: SimulatorOptions) -> TimeInterval {
        guard let jump = options.historyClockJump, requests >= jump.afterRequests else { return 0 }
        return jump.seconds
    }
    package var rateLimitedCount: Int { state.withLock { $0.rateLimited } }
    /// When the first request came, and the last 429 went out.
    package var rateLimitTimes: (firstRequest: Date?, lastRateLimited: Date?) { state.withLock { ($0.firstRequest, $0.lastRateLimited) } }

    /// Signs every notification of the scenario now, on every core, and serves those signatures
    /// from then on: for benchmarks, which measure the reconciler, not the simulator's signing.
    package func presign() throws {
        let notifications = scenario.notifications
        let chunks = stride(from: 0, to: notifications.count, by: 1000).map { $0..<min($0 + 1000, notifications.count) }
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: chunks.count) { index in
            var signed: [(String, String)] = []
            for notification in notifications[chunks[index]] {
                guard let jws = try? signNotification(notification) else {
                    failures.withLock { $0 += 1 }
                    continue
                }
                signed.append((notification.uuid, jws))
            }
            presigned.withLock { cache in for (uuid, jws) in signed { cache[uuid] = jws } }
        }
        guard failures.withLock({ $0 }) == 0 else { throw SimulatorError("could not sign \(failures.withLock { $0 }) notifications") }
    }

    /// Requests that reached an endpoint after one of its 429s had gone out (plus
    /// `options.retryAfterGrace`, for requests already on the wire) but before that 429's
    /// `Retry-After`: Apple counts them against the app.
    package var requestsBeforeRetryAfter: [RequestBeforeRetryAfter] { state.withLock { $0.requestsBeforeRetryAfter } }

    /// Every Get All Subscription Statuses request answered: the ID asked for.
    package var subscriptionStatusesRequests: [String] { state.withLock { $0.subscriptionStatusesRequests } }

    /// Every Get Transaction History request answered: the ID asked for and the revision sent.
    package var transactionHistoryRequests: [(id: String, revision: String?)] { state.withLock { $0.transactionHistoryRequests } }

    // MARK: - Dispatch

    package func handle(method: String, path: String, query: [(String, String)], authorization: String?, body: [UInt8], now: Date = Date()) -> Answer {
        let route = Route(method: method, path: path)
        guard let route else { return Answer(status: 404, headers: [], body: []) }
        // Look Up Order ID has no Sandbox URL.
        if case .lookUpOrderId = route, scenario.configuration.environment == .sandbox { return Answer(status: 404, headers: [], body: []) }
        state.withLock {
            $0.requestCounts[route.endpointName, default: 0] += 1
            if $0.firstRequest == nil { $0.firstRequest = now }
            // Every pause still in force counts, not only the latest 429's (a later 429 may say less).
            $0.retryAfter[route.endpointName]?.removeAll { $0.until <= now }
            if let held = $0.retryAfter[route.endpointName]?.first(where: { now > $0.answeredAt.addingTimeInterval(options.retryAfterGrace) && now < $0.until }) {
                $0.requestsBeforeRetryAfter.append(.init(endpoint: route.endpointName, answered429At: held.answeredAt, arrived: now, retryAfter: held.until))
            }
        }
        guard authorize(authorization, now: now) else { return Answer(status: 401, headers: [], body: []) }
        if let limited = rateLimit(route.endpointName, now: now) { return limited }
        let next = state.withLock { state -> InjectedAnswer? in
            if let answers = state.injectedByEndpoint[route.endpointName], !answers.isEmpty { return state.injectedByEndpoint[route.endpointName]!.removeFirst() }
            return state.injected.isEmpty ? nil : state.injected.removeFirst()
        }
        var dropAfterHandling = false
        if let injected = next {
            switch injected {
            case .dropAfterHandling:
                dropAfterHandling = true
            case .error(let status, let code, let message, let retryAfter):
                if status == 429, let retryAfter { noteRetryAfter(route.endpointName, answeredAt: now, until: retryAfter) }
                return .error(status, code, message, headers: retryAfter.map { [("Retry-After", String($0))] } ?? [])
            case .garbage:
                return Answer(status: 200, headers: [("Content-Type", "application/json")], body: Array("<html>oops".utf8))
            case .body(let text):
                return Answer(status: 200, headers: [("Content-Type", "application/json")], body: Array(text.utf8))
            }
        }
        if options.retryableErrorRate > 0, state.withLock({ Double.random(in: 0..<1, using: &$0.random) }) < options.retryableErrorRate {
            return .error(500, 5_000_001, "An unknown error occurred. Please try again.")
        }
        var answer: Answer
        switch route {
        case .notificationHistory: answer = notificationHistory(query: query, body: body, now: now)
        case .transactionHistory(let id):
            state.withLock { $0.transactionHistoryRequests.append((id, query.first { $0.0 == "revision" }?.1)) }
            answer = transactionHistory(id: id, query: query, now: now)
        case .subscriptionStatuses(let id):
            state.withLock { $0.subscriptionStatusesRequests.append(id) }
            answer = subscriptionStatuses(id: id, now: now)
        case .requestTestNotification: answer = requestTestNotification(now: now)
        case .testNotificationStatus(let token): answer = testNotificationStatus(token: token, now: now)
        case .sendConsumptionInformation(let id): answer = sendConsumptionInformation(transactionId: id, body: body, now: now)
        case .lookUpOrderId(let orderId): answer = lookUpOrder(orderId, now: now)
        case .extendRenewalDate(let id): answer = extendRenewalDate(originalTransactionId: id, body: body, now: now)
        case .massExtendRenewalDate: answer = massExtend(body: body, now: now)
        case .massExtensionStatus(let product, let identifier): answer = massExtensionStatus(productId: product, requestIdentifier: identifier, now: now)
        }
        if dropAfterHandling {
            // A body is promised so that it can be cut short (a 202 has none of its own).
            if answer.body.isEmpty { answer.body = Array("{}".utf8) }
            answer.dropMidBody = true
            return answer
        }
        if answer.status == 200, options.truncatedBodyRate > 0,
            state.withLock({ Double.random(in: 0..<1, using: &$0.random) }) < options.truncatedBodyRate
        {
            answer.body = Array(answer.body.prefix(answer.body.count / 2))
        } else if answer.status == 200, options.droppedConnectionRate > 0,
            state.withLock({ Double.random(in: 0..<1, using: &$0.random) }) < options.droppedConnectionRate
        {
            answer.dropMidBody = true
        }
        return answer
    }

    enum Route {
        case notificationHistory
        case transactionHistory(String)
        case subscriptionStatuses(String)
        case requestTestNotification
        case testNotificationStatus(String)
        case sendConsumptionInformation(String)
        case lookUpOrderId(String)
        case extendRenewalDate(String)
        case massExtendRenewalDate
        case massExtensionStatus(String, String)

        init?(method: String, path: String) {
            let parts = path.split(separator: "/").map(String.init)
            switch (method, parts.count) {
            case ("POST", 4) where parts == ["inApps", "v1", "notifications", "history"]: self = .notificationHistory
            case ("POST", 4) where parts == ["inApps", "v1", "notifications", "test"]: self = .requestTestNotification
            case ("GET", 5) where Array(parts.prefix(4)) == ["inApps", "v1", "notifications", "test"]: self = .testNotificationStatus(parts[4])
            case ("GET", 4) where Array(parts.prefix(3)) == ["inApps", "v2", "history"]: self = .transactionHistory(parts[3].removingPercentEncoding ?? parts[3])
            case ("GET", 4) where Array(parts.prefix(3)) == ["inApps", "v1", "subscriptions"]: self = .subscriptionStatuses(parts[3].removingPercentEncoding ?? parts[3])
            case ("PUT", 5) where Array(parts.prefix(4)) == ["inApps", "v2", "transactions", "consumption"]:
                self = .sendConsumptionInformation(parts[4].removingPercentEncoding ?? parts[4])
            case ("GET", 4) where Array(parts.prefix(3)) == ["inApps", "v1", "lookup"]: self = .lookUpOrderId(parts[3].removingPercentEncoding ?? parts[3])
            case ("POST", 5) where parts == ["inApps", "v1", "subscriptions", "extend", "mass"]: self = .massExtendRenewalDate
            case ("PUT", 5) where Array(parts.prefix(4)) == ["inApps", "v1", "subscriptions", "extend"]:
                self = .extendRenewalDate(parts[4].removingPercentEncoding ?? parts[4])
            case ("GET", 7) where Array(parts.prefix(5)) == ["inApps", "v1", "subscriptions", "extend", "mass"]:
                self = .massExtensionStatus(parts[5].removingPercentEncoding ?? parts[5], parts[6].removingPercentEncoding ?? parts[6])
            default: return nil
            }
        }

        var endpointName: String {
            switch self {
            case .notificationHistory: "notificationHistory"
            case .transactionHistory: "transactionHistory"
            case .subscriptionStatuses: "subscriptionStatuses"
            case .requestTestNotification: "requestTestNotification"
            case .testNotificationStatus: "testNotificationStatus"
            case .sendConsumptionInformation: "sendConsumptionInformation"
            case .lookUpOrderId: "lookUpOrderId"
            case .extendRenewalDate: "extendRenewalDate"
            case .massExtendRenewalDate: "massExtendRenewalDate"
            case .massExtensionStatus: "massExtensionStatus"
            }
        }
    }

    // MARK: - Authentication and rate limit

    /// Checks the bearer JWT as Apple does: ES256 signature by the configured key, `kid`, `iss`,
    /// `aud` appstoreconnect-v1, `bid`, not expired, `exp` at most 60 minutes after `iat`.
    func authorize(_ header: String?, now: Date) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let token = String(header.dropFirst("Bearer ".count))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2]),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else { return false }
        struct Header: Decodable { var alg: String?; var kid: String?; var typ: String? }
        struct Claims: Decodable { var iss: String?; var iat: Int64?; var exp: Int64?; var aud: String?; var bid: String? }
        guard let jwtHeader = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimBytes)),
            jwtHeader.alg == "ES256", jwtHeader.kid == credentials.keyId,
            credentials.privateKey.publicKey.isValidSignature(signature, for: Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)))
        else { return false }
        let seconds = Int64(now.timeIntervalSince1970)
        guard claims.iss == credentials.issuerId, claims.aud == "appstoreconnect-v1", claims.bid == scenario.configuration.bundleId,
            let expires = claims.exp, expires > seconds
        else { return false }
        if let issued = claims.iat, expires - issued > 3600 || issued > seconds + 60 { return false }
        return true
    }

    /// A token bucket per endpoint holding one second's worth of requests.
    func rateLimit(_ endpoint: String, now: Date) -> Answer? {
        guard let allowed = options.requestsPerSecond else { return nil }
        let rate = allowed * Self.rateShare(endpoint)
        return state.withLock { state -> Answer? in
            var bucket = state.buckets[endpoint] ?? (tokens: rate, updated: now)
            bucket.tokens = min(rate, bucket.tokens + now.timeIntervalSince(bucket.updated) * rate)
            bucket.updated = now
            defer { state.buckets[endpoint] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            state.rateLimited += 1
            state.lastRateLimited = now
            let resume = Int64((now.addingTimeInterval((1 - bucket.tokens) / rate).timeIntervalSince1970 * 1000).rounded(.up))
            state.retryAfter[endpoint, default: []].append((now, Date(timeIntervalSince1970: Double(resume) / 1000)))
            return .error(429, 4_290_000, "Rate limit exceeded.", headers: [("Retry-After", String(resume))])
        }
    }

    /// An endpoint's limit as a share of `requestsPerSecond` (Apple's Production figures: 50/s for
    /// most, 20/s for Extend a Subscription Renewal Date, 10/s for Look Up Order ID, 1/s for the mass
    /// extension and its status).
    static func rateShare(_ endpoint: String) -> Double {
        switch endpoint {
        case "lookUpOrderId": 0.2
        case "extendRenewalDate": 0.4
        case "massExtendRenewalDate", "massExtensionStatus": 0.02
        default: 1
        }
    }

    private func noteRetryAfter(_ endpoint: String, answeredAt: Date, until milliseconds: Int64) {
        state.withLock { $0.retryAfter[endpoint, default: []].append((answeredAt, Date(timeIntervalSince1970: Double(milliseconds) / 1000))) }
    }
}

/// A request that came while its endpoint's latest `Retry-After` still held.
package struct RequestBeforeRetryAfter: Sendable, Hashable, CustomStringConvertible {
    package var endpoint: String
    package var answered429At: Date
    package var arrived: Date
    package var retryAfter: Date

    package var description: String {
        "\(endpoint): arrived \(Int(arrived.timeIntervalSince(answered429At) * 1000)) ms after a 429, \(Int(retryAfter.timeIntervalSince(arrived) * 1000)) ms before its Retry-After"
    }
}

/// The simulator could not do what it was asked.
package struct SimulatorError: Error, CustomStringConvertible, Sendable {
    package var description: String
    package init(_ description: String) { self.description = description }
}

extension SimulatedAPI {
    /// What verifies this world's payloads: its test root, its app (`appAppleId` in Production
    /// only, as Apple's payloads carry it) and its environment.
    package var verifierConfiguration: VerifierConfiguration {
        let configuration = scenario.configuration
        return VerifierConfiguration(
            rootCertificates: [pki.root], bundleId: configuration.bundleId,
            appAppleId: configuration.environment == .production ? configuration.appAppleId : nil, environment: configuration.environment
        )
    }
}
