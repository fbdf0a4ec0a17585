import AppStoreServerAPI
import Clocks
import Crypto
import Foundation
import SignedData
import Synchronization
import Testing

/// When each caller of the rate limiter test left, on the test clock.
final class Departures: Sendable {
    let value = Mutex<[Duration]>([])
}

@Suite("Client pieces without a server")
struct ClientUnitTests {
    /// Apple enforces its rate limits per hour: a 429's Retry-After within the bound (an hour by
    /// default) is waited for; beyond it, the request stops and says when to resume.
    @Test func aRetryAfterWithinTheHourIsWaitedForAndOneBeyondItStops() {
        let policy = RetryPolicy()
        #expect(policy.maximumRateLimitWait == .seconds(3600))
        #expect(policy.rateLimited(retryAfter: .seconds(300), waited: .zero) == .wait(.seconds(300)), "5 minutes ahead: wait")
        #expect(policy.rateLimited(retryAfter: .seconds(7200), waited: .zero) == .stop, "2 hours ahead: stop")
        #expect(policy.rateLimited(retryAfter: .seconds(300), waited: .seconds(3400)) == .stop, "the bound is for all the waits of a request")
    }

    /// The rate limiter alone, on a test clock: 16 callers reserve slots 25 ms apart (0 to
    /// 375 ms); at 100 ms a 429's `Retry-After` pauses the endpoint until 500 ms, covering the
    /// slots still ahead. None of them may leave during the pause, and they leave after it. Time
    /// moves only when the test advances it (25 ms, one slot, at a time), so nothing waits. Each caller's
    /// departure is the instant the limiter let it go, the one it checked the pauses against: a
    /// caller the busy machine woke late decides at that later time, so lateness cannot hide a
    /// departure in the pause nor fake one. With the limiter as it was before 4b3f9a7 (no second
    /// look on waking), the callers of slots 125 to 375 ms leave during the pause and this fails.
    @Test(.timeLimit(.minutes(3)))
    func aPauseHoldsBackCallersThatHadReservedASlotBeforeIt() async throws {
        let clock = TestClock()
        let limiterClock = AnyClock(clock)
        let limiter = RateLimiter(requestsPerSecond: 40, clock: limiterClock)
        let start = limiterClock.now
        let departures = Departures()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let left = start.duration(to: try await limiter.acquire())
                    departures.value.withLock { $0.append(left) }
                }
            }
            // Every caller has taken its slot (0 to 375 ms) before time moves.
            while limiter.firstFreeSlot != start.advanced(by: .milliseconds(400)) { await Task.yield() }
            await clock.advance(by: .milliseconds(100))
            limiter.pause(for: .milliseconds(400))  // told at 100 ms: until 500 ms
            // A slot at a time (each advance yields to the woken callers; under the whole suite,
            // 200 steps of 5 ms took about a minute).
            for _ in 0..<36 { await clock.advance(by: .milliseconds(25)) }
            try await group.waitForAll()
        }
        let left = departures.value.withLock { $0 }.sorted()
        #expect(left.count == 16)
        let early = left.filter { $0 > .milliseconds(100) && $0 < .milliseconds(500) }
        #expect(early.isEmpty, "\(early.count) caller(s) left during the pause")
        // Only the slots at or before 100 ms (at most five) could be taken before the pause.
        // The slots at or before 100 ms (five) may leave before the pause or, woken after it was
        // told (a busy machine: the fresh-clone CI saw one), after it; the others only after it.
        #expect(left.filter { $0 >= .milliseconds(500) }.count >= 11, "the slots the pause covered moved after it")
    }

    @Test func theBearerTokenCarriesApplesHeaderAndClaimsAndIsReused() throws {
        let key = P256.Signing.PrivateKey()
        let issuer = BearerTokenIssuer(credentials: APICredentials(issuerId: "issuer-1", keyId: "KEY123", bundleId: "com.example.app", signingKey: key))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try issuer.token(now: now)
        let parts = token.split(separator: ".")
        #expect(parts.count == 3)
        let header = try JSONDecoder().decode([String: String].self, from: Data(Base64URL.decode(parts[0])!))
        #expect(header == ["alg": "ES256", "kid": "KEY123", "typ": "JWT"])
        let claims = try JSONDecoder().decode([String: JSONValue].self, from: Data(Base64URL.decode(parts[1])!))
        #expect(claims["iss"] == .string("issuer-1"))
        #expect(claims["aud"] == .string("appstoreconnect-v1"))
        #expect(claims["bid"] == .string("com.example.app"))
        guard case .number(let iat)? = claims["iat"], case .number(let exp)? = claims["exp"] else {
            Issue.record("iat and exp are numbers of seconds")
            return
        }
        #expect(iat == 1_800_000_000)
        #expect(exp > iat && exp - iat <= 3600)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Base64URL.decode(parts[2])!)
        #expect(key.publicKey.isValidSignature(signature, for: Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(try issuer.token(now: now.addingTimeInterval(60)) == token, "reused while far from expiry")
        #expect(try issuer.token(now: now.addingTimeInterval(290)) != token, "renewed shortly before expiry")
    }

    @Test func theHistoryRequestOmitsEveryUnsetField() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let plain = String(decoding: try encoder.encode(NotificationHistoryRequest(startDate: 1, endDate: 2)), as: UTF8.self)
        #expect(plain == "{\"endDate\":2,\"startDate\":1}")
        let empty = NotificationHistoryRequest(startDate: 1, endDate: 2, notificationType: NotificationType(rawValue: ""), transactionId: "")
        #expect(String(decoding: try encoder.encode(empty), as: UTF8.self) == "{\"endDate\":2,\"startDate\":1}", "never an empty string")
        let filtered = NotificationHistoryRequest(startDate: 1, endDate: 2, notificationType: .expired, notificationSubtype: .voluntary, onlyFailures: true)
        #expect(String(decoding: try encoder.encode(filtered), as: UTF8.self) == "{\"endDate\":2,\"notificationSubtype\":\"VOLUNTARY\",\"notificationType\":\"EXPIRED\",\"onlyFailures\":true,\"startDate\":1}")
    }

    @Test func transactionHistoryFiltersAreRepeatedQueryParameters() {
        let query = TransactionHistoryQuery(productTypes: ["AUTO_RENEWABLE", "NON_CONSUMABLE"], revoked: false)
        let items = query.queryItems(revision: "abc")
        #expect(items.map(\.0) == ["revision", "sort", "productType", "productType", "revoked"])
        #expect(items.map(\.1) == ["abc", "ASCENDING", "AUTO_RENEWABLE", "NON_CONSUMABLE", "false"])
    }

    @Test func plainHTTPIsAcceptedOnlyToLoopback() throws {
        #expect(try APIBaseURL("http://127.0.0.1:8080/").url == "http://127.0.0.1:8080")
        #expect(throws: Never.self) { try APIBaseURL("http://localhost:1") }
        #expect(throws: Never.self) { try APIBaseURL("http://[::1]:9") }
        #expect(throws: APIBaseURLError.self) { try APIBaseURL("http://10.0.0.5") }
        #expect(throws: APIBaseURLError.self) { try APIBaseURL("http://api.storekit.apple.com") }
        #expect(throws: APIBaseURLError.self) { try APIBaseURL("ftp://127.0.0.1") }
        #expect(APIBaseURL.apple(.production).url == "https://api.storekit.apple.com")
        #expect(APIBaseURL.apple(.sandbox).url == "https://api.storekit-sandbox.apple.com")
    }

    @Test func defaultRatesAreApplesLimitsAndTenPercentInSandbox() throws {
        let credentials = APICredentials(issuerId: "i", keyId: "k", bundleId: "b", signingKey: P256.Signing.PrivateKey())
        let production = AppStoreServerAPIConfiguration(credentials: credentials, environment: .production)
        let sandbox = AppStoreServerAPIConfiguration(credentials: credentials, environment: .sandbox)
        #expect(production.requestsPerSecond[.notificationHistory] == 50)
        #expect(production.requestsPerSecond[.transactionHistory] == 50)
        #expect(sandbox.requestsPerSecond[.notificationHistory] == 5)
    }

    @Test func credentialsNeverPrintTheKey() throws {
        let key = P256.Signing.PrivateKey()
        let credentials = APICredentials(issuerId: "i", keyId: "K1", bundleId: "b", signingKey: key)
        #expect(!"\(credentials)".contains(key.pemRepresentation.split(separator: "\n")[1]))
        #expect(throws: APICredentialsError.self) { try APICredentials.signingKey(pem: "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----") }
    }
}

@Suite("Retry-After")
struct RetryAfterTests {
    @Test func applesEpochMillisecondsBecomeTheTimeLeftUntilThen() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(AppStoreServerAPIClient.retryAfter("1800000002500", now: now) == .milliseconds(2_500))
        #expect(AppStoreServerAPIClient.retryAfter("1799999999000", now: now) == .zero, "a time already past means now")
    }

    @Test func aSmallNumberIsTakenAsSecondsAndGarbageIsIgnored() {
        #expect(AppStoreServerAPIClient.retryAfter("3") == .seconds(3))
        #expect(AppStoreServerAPIClient.retryAfter("soon") == nil)
        #expect(AppStoreServerAPIClient.retryAfter(nil) == nil)
    }
}
