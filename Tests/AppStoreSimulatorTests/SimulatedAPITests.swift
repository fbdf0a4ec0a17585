import AppStoreServerAPI
import AppStoreSimulator
import Crypto
import Foundation
import SignedData
import Testing

/// The simulator's rules, checked by calling it directly (no HTTP) with explicit times.
@Suite("The simulator follows Apple's documented rules")
struct SimulatedAPITests {
    let api: SimulatedAPI
    let now = Date()

    init() throws {
        var configuration = Scenario.Configuration()
        configuration.seed = 5
        configuration.customers = 120
        configuration.now = now
        // A recent outage: deliveries in it failed and Apple's next retries are still to come.
        configuration.outage = now.addingTimeInterval(-10 * 3600)..<now.addingTimeInterval(-3600)
        api = try SimulatedAPI(scenario: Scenario(configuration))
    }

    var bearer: String { bearer(at: now) }

    func bearer(at time: Date) -> String {
        let credentials = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: api.scenario.configuration.bundleId,
            signingKey: api.credentials.privateKey
        )
        return "Bearer " + (try! BearerTokenIssuer(credentials: credentials).token(now: time))
    }

    var nowMs: Int64 { Int64(now.timeIntervalSince1970 * 1000) }

    func history(_ body: String, token: String? = nil, authorization: String? = nil, at time: Date? = nil) -> SimulatedAPI.Answer {
        api.handle(
            method: "POST", path: "/inApps/v1/notifications/history", query: token.map { [("paginationToken", $0)] } ?? [],
            authorization: authorization ?? bearer(at: time ?? now), body: Array(body.utf8), now: time ?? now
        )
    }

    func decodeHistory(_ answer: SimulatedAPI.Answer) throws -> NotificationHistoryResponse {
        try JSONDecoder().decode(NotificationHistoryResponse.self, from: Data(answer.body))
    }

    func errorCode(_ answer: SimulatedAPI.Answer) -> Int64? {
        struct Body: Decodable { var errorCode: Int64 }
        return try? JSONDecoder().decode(Body.self, from: Data(answer.body)).errorCode
    }

    /// Every notification of a type/subtype query, following the pages.
    func all(_ body: String) throws -> [NotificationPayload] {
        var token: String?
        var payloads: [NotificationPayload] = []
        repeat {
            let page = try decodeHistory(history(body, token: token))
            for item in page.notificationHistory {
                let bytes = try #require(Base64URL.decode(Substring(item.signedPayload.split(separator: ".")[1])))
                payloads.append(try JSONDecoder().decode(NotificationPayload.self, from: Data(bytes)))
            }
            token = page.hasMore ? page.paginationToken : nil
        } while token != nil
        return payloads
    }

    var window: String { "\"startDate\":\(nowMs - 10 * 86_400_000),\"endDate\":\(nowMs)" }

    @Test func aStartDateNotBeforeTheEndDateIsRefused() {
        #expect(errorCode(history("{\"startDate\":\(nowMs - 1000),\"endDate\":\(nowMs - 1000)}")) == 4_000_013)
        #expect(errorCode(history("{\"startDate\":\(nowMs - 1000),\"endDate\":\(nowMs - 2000)}")) == 4_000_013)
    }

    @Test func aStartDateBeyondTheRetentionIsRefused() {
        let answer = history("{\"startDate\":\(nowMs - 181 * 86_400_000),\"endDate\":\(nowMs)}")
        #expect(answer.status == 400)
        #expect(errorCode(answer) == 4_000_012)
    }

    @Test func anEndDateInTheFutureMeansNow() throws {
        let answer = history("{\"startDate\":\(nowMs - 10 * 86_400_000),\"endDate\":\(nowMs + 86_400_000)}")
        #expect(answer.status == 200)
    }

    @Test func aTypeTogetherWithATransactionIdIsTooManyFilters() {
        let id = api.scenario.customers[0].originalTransactionId
        #expect(errorCode(history("{\(window),\"notificationType\":\"DID_RENEW\",\"transactionId\":\"\(id)\"}")) == 4_000_019)
    }

    @Test func aSubtypeWithoutItsTypeOrAnImpossiblePairIsAnInvalidType() {
        #expect(errorCode(history("{\(window),\"notificationSubtype\":\"VOLUNTARY\"}")) == 4_000_018)
        #expect(errorCode(history("{\(window),\"notificationType\":\"DID_RENEW\",\"notificationSubtype\":\"VOLUNTARY\"}")) == 4_000_018)
        #expect(errorCode(history("{\(window),\"notificationType\":\"NOT_A_TYPE\"}")) == 4_000_018)
    }

    @Test func aTypeWithoutASubtypeReturnsOnlyNotificationsWithoutOne() throws {
        let expiredWithoutSubtype = try all("{\(window),\"notificationType\":\"EXPIRED\"}")
        let voluntary = try all("{\(window),\"notificationType\":\"EXPIRED\",\"notificationSubtype\":\"VOLUNTARY\"}")
        let scenarioExpired = api.scenario.notifications.filter { $0.type == .expired }
        #expect(expiredWithoutSubtype.allSatisfy { $0.notificationType == .expired && $0.subtype == nil })
        #expect(expiredWithoutSubtype.count == scenarioExpired.filter { $0.subtype == nil }.count)
        #expect(voluntary.count == scenarioExpired.filter { $0.subtype == .voluntary }.count)
        #expect(voluntary.count > 0 && expiredWithoutSubtype.count < scenarioExpired.count, "the scenario has both kinds")
    }

    @Test func onlyFailuresReturnsOnlyNotificationsNeverDelivered() throws {
        let failures = try all("{\(window),\"onlyFailures\":true}")
        let missed = Set(api.scenario.missedNotifications.map(\.uuid))
        #expect(Set(failures.map(\.notificationUUID)) == missed)
        #expect(!missed.isEmpty)
    }

    @Test func pagesHoldAtMostTwentyOldestFirst() throws {
        let page = try decodeHistory(history("{\(window)}"))
        #expect(page.notificationHistory.count == 20)
        #expect(page.hasMore)
        let dates = try page.notificationHistory.map { item -> Int64 in
            let bytes = try #require(Base64URL.decode(Substring(item.signedPayload.split(separator: ".")[1])))
            return try JSONDecoder().decode(NotificationPayload.self, from: Data(bytes)).signedDate ?? 0
        }
        #expect(dates == dates.sorted())
    }

    @Test func aPaginationTokenIsBoundToItsBodyAndExpires() throws {
        let page = try decodeHistory(history("{\(window)}"))
        let token = try #require(page.paginationToken)
        #expect(history("{\(window)}", token: token).status == 200)
        #expect(errorCode(history("{\(window),\"onlyFailures\":true}", token: token)) == 4_000_014)
        #expect(errorCode(history("{\(window)}", token: "garbage")) == 4_000_014)
        #expect(errorCode(history("{\(window)}", token: token, at: now.addingTimeInterval(3_601))) == 4_000_017)
    }

    @Test func historyItemsCarryTheirSendAttemptsWithTheFailureResults() throws {
        let failures = try decodeHistory(history("{\(window),\"onlyFailures\":true}"))
        let item = try #require(failures.notificationHistory.first)
        let attempts = try #require(item.sendAttempts)
        #expect(!attempts.isEmpty && attempts.count <= 6)
        #expect(attempts.allSatisfy { $0.sendAttemptResult != .success })
    }

    @Test func theBearerTokenIsChecked() {
        #expect(history("{\(window)}", authorization: "").status == 401)
        #expect(history("{\(window)}", authorization: "Bearer a.b.c").status == 401)
        let stranger = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: api.scenario.configuration.bundleId,
            signingKey: P256.Signing.PrivateKey()
        )
        #expect(history("{\(window)}", authorization: "Bearer " + (try! BearerTokenIssuer(credentials: stranger).token(now: now))).status == 401)
        let wrongBundle = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: "com.other", signingKey: api.credentials.privateKey
        )
        #expect(history("{\(window)}", authorization: "Bearer " + (try! BearerTokenIssuer(credentials: wrongBundle).token(now: now))).status == 401)
        let expired = "Bearer " + (try! BearerTokenIssuer(credentials: APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: api.scenario.configuration.bundleId,
            signingKey: api.credentials.privateKey
        )).token(now: now.addingTimeInterval(-3600)))
        #expect(history("{\(window)}", authorization: expired).status == 401)
    }

    @Test func aTokenLivingLongerThanAnHourIsRefused() {
        let credentials = APICredentials(
            issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: api.scenario.configuration.bundleId,
            signingKey: api.credentials.privateKey
        )
        let longLived = BearerTokenIssuer(credentials: credentials, lifetime: 3600)
        #expect(history("{\(window)}", authorization: "Bearer " + (try! longLived.token(now: now))).status == 200, "60 minutes is allowed")
    }

    @Test func theRateLimitAnswers429WithRetryAfterInEpochMilliseconds() throws {
        var options = SimulatorOptions()
        options.requestsPerSecond = 2
        let limited = try SimulatedAPI(scenario: api.scenario, options: options, credentials: api.credentials)
        var answers: [SimulatedAPI.Answer] = []
        for _ in 0..<3 {
            answers.append(limited.handle(method: "POST", path: "/inApps/v1/notifications/history", query: [], authorization: bearer, body: Array("{\(window)}".utf8), now: now))
        }
        #expect(answers.map(\.status) == [200, 200, 429])
        #expect(errorCode(answers[2]) == 4_290_000)
        let retryAfter = try #require(answers[2].headers.first { $0.0 == "Retry-After" }.flatMap { Int64($0.1) })
        #expect(retryAfter > nowMs && retryAfter <= nowMs + 1_000, "an absolute UNIX time in milliseconds")
    }

    @Test func transactionHistoryMovesARefundedTransactionToTheEndAndAStoredRevisionSeesIt() throws {
        // A customer with a refund: fetch as of before the refund, then after it.
        // An account whose only refund is its last change: after it, nothing else moves.
        let customer = try #require(api.scenario.customers.first { customer in
            customer.transactionVersions.contains { $0.transaction.revocationDate != nil }
                && customer.transactionVersions.max { $0.modified < $1.modified }?.transaction.revocationDate != nil
                && customer.transactionVersions.filter { $0.transaction.revocationDate != nil }.count == 1
        })
        let refund = try #require(customer.transactionVersions.last { $0.transaction.revocationDate != nil })
        let before = Date(timeIntervalSince1970: Double(refund.modified - 1) / 1000)
        func fetch(_ revision: String?, at time: Date) throws -> HistoryResponse {
            let answer = api.handle(
                method: "GET", path: "/inApps/v2/history/\(customer.originalTransactionId)",
                query: [("sort", "ASCENDING")] + (revision.map { [("revision", $0)] } ?? []), authorization: bearer(at: time), body: [], now: time
            )
            #expect(answer.status == 200)
            return try JSONDecoder().decode(HistoryResponse.self, from: Data(answer.body))
        }
        var revision: String?
        var seen: [String] = []
        repeat {
            let page = try fetch(revision, at: before)
            seen += page.signedTransactions.compactMap { UnverifiedPayload.fields(of: $0)?["transactionId"] }.compactMap { value -> String? in
                if case .string(let id) = value { return id }
                return nil
            }
            revision = page.revision
            if !page.hasMore { break }
        } while true
        #expect(seen.contains(refund.transaction.transactionId!), "the transaction was returned before its refund")
        let after = try fetch(revision, at: now)
        #expect(after.signedTransactions.count == 1, "only what changed since the stored revision")
        let fields = try #require(UnverifiedPayload.fields(of: after.signedTransactions[0]))
        #expect(fields["transactionId"] == .string(refund.transaction.transactionId!))
        #expect(fields["revocationDate"] != nil)
    }

    @Test func unknownAndInvalidTransactionIdsGetApplesErrors() {
        let unknown = api.handle(method: "GET", path: "/inApps/v2/history/9999999999999999", query: [], authorization: bearer, body: [], now: now)
        #expect(unknown.status == 404)
        #expect(errorCode(unknown) == 4_040_010)
        let invalid = api.handle(method: "GET", path: "/inApps/v1/subscriptions/abc", query: [], authorization: bearer, body: [], now: now)
        #expect(errorCode(invalid) == 4_000_006)
        let badRevision = api.handle(
            method: "GET", path: "/inApps/v2/history/\(api.scenario.customers[0].originalTransactionId)", query: [("revision", "###")],
            authorization: bearer, body: [], now: now
        )
        #expect(errorCode(badRevision) == 4_000_005)
    }

    @Test func theSameSeedYieldsTheSameScenario() {
        let again = Scenario(api.scenario.configuration)
        #expect(again.notifications == api.scenario.notifications)
        #expect(again.customers == api.scenario.customers)
    }

    @Test func productionRetriesDeliverLaterAndSandboxNeverRetries() {
        let production = api.scenario.notifications
        #expect(production.contains { $0.sendAttempts.count > 1 && $0.delivered }, "a retry after the outage delivered some")
        var configuration = api.scenario.configuration
        configuration.environment = .sandbox
        let sandbox = Scenario(configuration)
        #expect(sandbox.notifications.allSatisfy { $0.sendAttempts.count <= 1 })
        // Of the notifications whose first attempt failed, Production delivers some later and
        // Sandbox none.
        func firstFailed(_ notifications: [Scenario.Notification]) -> [Scenario.Notification] {
            notifications.filter { ($0.sendAttempts.first?.result ?? "SUCCESS") != "SUCCESS" }
        }
        #expect(!firstFailed(sandbox.notifications).isEmpty && firstFailed(sandbox.notifications).allSatisfy { !$0.delivered })
        #expect(firstFailed(production).contains { $0.delivered })
    }
}

@Suite("The simulator checks the JWT's claims")
struct SimulatorJWTTests {
    /// A JWT with any claims, signed by `key`.
    static func jwt(key: P256.Signing.PrivateKey, kid: String, claims: [String: JSONValue]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let header = Base64URL.encode(try encoder.encode(["alg": "ES256", "kid": kid, "typ": "JWT"]))
        let body = Base64URL.encode(try encoder.encode(JSONValue.object(claims)))
        let signature = try key.signature(for: Array("\(header).\(body)".utf8))
        return "\(header).\(body).\(Base64URL.encode(signature.rawRepresentation))"
    }

    @Test func theAudienceTheBundleAndALifetimeOverAnHourAreChecked() throws {
        var configuration = Scenario.Configuration()
        configuration.customers = 3
        let api = try SimulatedAPI(scenario: Scenario(configuration))
        let now = Date()
        let seconds = Double(Int64(now.timeIntervalSince1970))
        func status(_ changes: [String: JSONValue]) throws -> Int {
            var claims: [String: JSONValue] = [
                "iss": .string(api.credentials.issuerId), "iat": .number(seconds), "exp": .number(seconds + 300),
                "aud": .string("appstoreconnect-v1"), "bid": .string(configuration.bundleId),
            ]
            for (key, value) in changes { claims[key] = value }
            let token = try Self.jwt(key: api.credentials.privateKey, kid: api.credentials.keyId, claims: claims)
            return api.handle(
                method: "POST", path: "/inApps/v1/notifications/history", query: [], authorization: "Bearer \(token)",
                body: Array("{\"startDate\":\(Int64(seconds * 1000) - 86_400_000),\"endDate\":\(Int64(seconds * 1000))}".utf8), now: now
            ).status
        }
        #expect(try status([:]) == 200)
        #expect(try status(["aud": .string("appstoreconnect-v2")]) == 401)
        #expect(try status(["bid": .string("com.someone.else")]) == 401)
        #expect(try status(["iss": .string("another-issuer")]) == 401)
        #expect(try status(["exp": .number(seconds + 3_700)]) == 401, "more than 60 minutes after iat")
        #expect(try status(["exp": .number(seconds - 1)]) == 401, "expired")
    }
}
