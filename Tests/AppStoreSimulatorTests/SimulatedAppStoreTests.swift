import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
import Testing

/// One environment's host serving two apps of one team, as Apple's does: the JWT's `bid` picks
/// the app, each app answers from its own world and spends its own rate budget.
@Suite("The simulator's host of several apps")
struct SimulatedAppStoreTests {
    let now: Date
    let one: SimulatedAPI
    let two: SimulatedAPI
    let host: SimulatedAppStore

    /// An app of one team (`key`, signed by `pki`), two requests a second per endpoint.
    static func app(_ bundleId: String, seed: UInt64, now: Date, key: SimulatorCredentials, pki: TestPKI) throws -> SimulatedAPI {
        var options = SimulatorOptions()
        options.requestsPerSecond = 2
        var configuration = Scenario.Configuration()
        (configuration.bundleId, configuration.seed, configuration.customers, configuration.now) = (bundleId, seed, 20, now)
        configuration.outage = now.addingTimeInterval(-10 * 3600)..<now.addingTimeInterval(-3600)
        return try SimulatedAPI(scenario: Scenario(configuration), options: options, credentials: key, pki: pki)
    }

    init() throws {
        let now = Date()
        let pki = try TestPKI(TestPKI.Options(referenceTime: now))
        let key = SimulatorCredentials()
        self.now = now
        one = try Self.app("com.example.one", seed: 1, now: now, key: key, pki: pki)
        two = try Self.app("com.example.two", seed: 2, now: now, key: key, pki: pki)
        host = try SimulatedAppStore([one, two])
    }

    func bearer(_ bundleId: String) -> String {
        let credentials = APICredentials(issuerId: one.credentials.issuerId, keyId: one.credentials.keyId, bundleId: bundleId, signingKey: one.credentials.privateKey)
        return "Bearer " + (try! BearerTokenIssuer(credentials: credentials).token(now: now))
    }

    func history(_ bundleId: String) -> SimulatedAPI.Answer {
        let window = "{\"startDate\":\(Int64(now.addingTimeInterval(-86_400).timeIntervalSince1970 * 1000)),\"endDate\":\(Int64(now.timeIntervalSince1970 * 1000))}"
        return host.handle(method: "POST", path: "/inApps/v1/notifications/history", query: [], authorization: bearer(bundleId), body: Array(window.utf8), now: now)
    }

    @Test func theJWTsBidPicksTheAppAndAnUnknownOneIsRefused() throws {
        let answer = history("com.example.two")
        #expect(answer.status == 200)
        let page = try JSONDecoder().decode(NotificationHistoryResponse.self, from: Data(answer.body))
        let uuids = Set(page.notificationHistory.compactMap { UnverifiedPayload.notificationUUID(of: $0.signedPayload) })
        #expect(!uuids.isEmpty && uuids.isSubset(of: Set(two.scenario.notifications.map(\.uuid))), "app two's own notifications")
        #expect(one.requestCounts.isEmpty && two.requestCounts["notificationHistory"] == 1)
        #expect(history("com.example.other").status == 401)
    }

    @Test func eachAppSpendsItsOwnRateBudget() {
        // Two requests a second each: app one's third is refused, app two's first two are not.
        #expect([history("com.example.one"), history("com.example.one"), history("com.example.one")].map(\.status) == [200, 200, 429])
        #expect([history("com.example.two"), history("com.example.two")].map(\.status) == [200, 200])
    }

    @Test func oneHostServesOneEnvironmentAndEachAppOnce() throws {
        var configuration = Scenario.Configuration()
        configuration.environment = .sandbox
        let sandbox = try SimulatedAPI(scenario: Scenario(configuration))
        #expect(throws: SimulatorError.self) { try SimulatedAppStore([one, sandbox]) }
        #expect(throws: SimulatorError.self) { try SimulatedAppStore([one, one]) }
    }
}
