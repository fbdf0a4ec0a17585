import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

/// Refund requests (CONSUMPTION_REQUEST) the team must answer within 12 hours: every one the
/// ledger records has a row in `app_store.consumption_requests` and a change-feed row.
@Suite("Refund requests to answer: app_store.consumption_requests")
struct ConsumptionRequestTests {
    struct Row: Hashable {
        var uuid: String
        var sent: Int64
        var deadline: Int64
        var original: String
    }

    static func rows(_ client: PostgresClient) async throws -> [String: Row] {
        var found: [String: Row] = [:]
        let query: PostgresQuery = """
            SELECT notification_uuid::text, (extract(epoch FROM sent_date) * 1000)::bigint, (extract(epoch FROM deadline_date) * 1000)::bigint,
                original_transaction_id FROM app_store.consumption_requests WHERE answered_date IS NULL
            """
        for try await (uuid, sent, deadline, original) in try await client.query(query).decode((String, Int64, Int64, String).self) {
            found[uuid] = Row(uuid: uuid, sent: sent, deadline: deadline, original: original)
        }
        return found
    }

    static func fed(_ client: PostgresClient) async throws -> [String: String] {
        var found: [String: String] = [:]
        let query: PostgresQuery = "SELECT notification_uuid::text, cause FROM app_store.changes WHERE kind = 'consumption_request'"
        for try await (uuid, cause) in try await client.query(query).decode((String, String).self) { found[uuid] = cause }
        return found
    }

    @Test func everyConsumptionRequestRecordedLiveOrRecoveredHasARowWithItsDeadlineAndOneFeedRow() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 61, outageHours: 60)
        let requests = harness.scenario.notifications.filter { $0.type == .consumptionRequest }
        let live = requests.filter(\.delivered)
        let missed = requests.filter { !$0.delivered }
        try #require(!live.isEmpty && !missed.isEmpty, "the world has refund requests delivered and missed")
        #expect(Set(requests.compactMap(\.transaction.type)).count >= 2, "refund requests about more than one product type")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let afterLive = try await Self.rows(client)
                #expect(Set(afterLive.keys) == Set(live.map(\.uuid)), "each live one, when it is recorded")
                for request in live {
                    // A live delivery is Apple's send attempt: counted from its signedDate.
                    #expect(afterLive[request.uuid]?.sent == request.signedDate)
                    #expect(afterLive[request.uuid]?.deadline == request.signedDate + 12 * 3_600_000)
                }
                _ = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                let all = try await Self.rows(client)
                #expect(Set(all.keys) == Set(requests.map(\.uuid)))
                for request in missed {
                    let first = try #require(request.sendAttempts.map(\.date).min())
                    #expect(all[request.uuid]?.sent == first, "from Apple's first send attempt")
                    #expect(all[request.uuid]?.deadline == first + 12 * 3_600_000)
                    #expect(all[request.uuid]?.original == request.originalTransactionId)
                }
                let feed = try await Self.fed(client)
                #expect(feed.count == requests.count, "one feed row each")
                #expect(live.allSatisfy { feed[$0.uuid] == "webhook" } && missed.allSatisfy { feed[$0.uuid] == "history" })

                // The team answers one: its column, no feed row, nothing else moves; a second run writes nothing.
                try await client.query("UPDATE app_store.consumption_requests SET answered_date = now() WHERE notification_uuid = \(UUID(uuidString: missed[0].uuid)!)")
                _ = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                #expect(try await Self.rows(client).count == requests.count - 1)
                #expect(try await Self.fed(client).count == requests.count)
            }
        }
    }

    /// The first request of each episode of each transaction: requests signed after the same
    /// number of Apple's decisions (REFUND, REFUND_DECLINED) on that transaction are one request.
    static func expectedFirsts(_ scenario: Scenario) -> [String: Scenario.Notification] {
        var firsts: [String: Scenario.Notification] = [:]
        let decisions = scenario.notifications.filter { $0.type == .refund || $0.type == .refundDeclined }
        for request in scenario.notifications where request.type == .consumptionRequest {
            guard let transaction = request.transaction.transactionId else { continue }
            let episode = decisions.filter { $0.transaction.transactionId == transaction && $0.signedDate < request.signedDate }.count
            let key = "\(transaction)#\(episode)"
            if let known = firsts[key], known.signedDate <= request.signedDate { continue }
            firsts[key] = request
        }
        return firsts
    }

    /// The latest request of each transaction's episode (issue 62: the episode's deadline is its).
    static func expectedLatest(_ scenario: Scenario) -> [String: Scenario.Notification] {
        var latest: [String: Scenario.Notification] = [:]
        let decisions = scenario.notifications.filter { $0.type == .refund || $0.type == .refundDeclined }
        for request in scenario.notifications where request.type == .consumptionRequest {
            guard let transaction = request.transaction.transactionId else { continue }
            let episode = decisions.filter { $0.transaction.transactionId == transaction && $0.signedDate < request.signedDate }.count
            let key = "\(transaction)#\(episode)"
            if let known = latest[key], known.signedDate >= request.signedDate { continue }
            latest[key] = request
        }
        return latest
    }

    static func allRows(_ client: PostgresClient) async throws -> [String: (transaction: String, deadline: Int64, answered: Bool)] {
        var found: [String: (transaction: String, deadline: Int64, answered: Bool)] = [:]
        let query: PostgresQuery = """
            SELECT notification_uuid::text, transaction_id, (extract(epoch FROM deadline_date) * 1000)::bigint, answered_date IS NOT NULL
            FROM app_store.consumption_requests
            """
        for try await (uuid, transaction, deadline, answered) in try await client.query(query).decode((String, String, Int64, Bool).self) {
            found[uuid] = (transaction, deadline, answered)
        }
        return found
    }

    /// Issue 48, point 4: Apple sends a new CONSUMPTION_REQUEST every 8 hours or so while a refund
    /// request is unanswered, and a customer asks again after Apple declined. Recorded live (in
    /// signedDate order) or recovered (requests first, the decisions after them), the ledger holds
    /// one open request per transaction and episode, the first one's, with its latest request's deadline; every
    /// notification is still recorded. A team that marks the request answered is not paged again
    /// by a repeat that follows.
    @Test(arguments: [true, false])
    func repeatedRequestsForATransactionAreOneRequestUntilAppleDecidesWhateverTheOrderTheyAreRecordedIn(live: Bool) async throws {
        let harness = try RecoveryHarness(customers: 45, seed: 63, outageHours: live ? 0 : 8 * 24) { configuration in
            configuration.consumptionRequestRepeats = 2
            configuration.refundsDeclinedFirst = true
        }
        let requests = harness.scenario.notifications.filter { $0.type == .consumptionRequest }
        let firsts = Self.expectedFirsts(harness.scenario)
        // Apple repeats about 8 hours apart, until it decides: some episodes are asked once (declined
        // within hours), others several times.
        try #require(requests.count >= firsts.count + 4 && firsts.count >= 4, "the world repeats its refund requests: \(requests.count), \(firsts.count)")
        // Transactions whose customer asked again after Apple declined (the world's present may
        // fall between the decline and the new request).
        let declines = harness.scenario.notifications.filter { $0.type == .refundDeclined }
        let declined = Set(requests.filter { request in
            declines.contains { $0.transaction.transactionId == request.transaction.transactionId && $0.signedDate < request.signedDate }
        }.compactMap(\.transaction.transactionId))
        try #require(!declined.isEmpty, "and asks again after a decline")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                if !live { _ = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window())) }
                let recorded = try await RecoveryHarness.historyUUIDs(client).union(Self.webhookUUIDs(client))
                #expect(Set(requests.map(\.uuid)).isSubset(of: recorded), "every request is recorded")
                let rows = try await Self.allRows(client)
                #expect(Set(rows.keys) == Set(firsts.values.map(\.uuid)), "one row per transaction and episode: \(rows.count) rows, \(firsts.count) expected")
                let latest = Self.expectedLatest(harness.scenario)
                for (key, first) in firsts where live {
                    let last = try #require(latest[key])
                    #expect(rows[first.uuid]?.deadline == last.signedDate + 12 * 3_600_000, "12 hours after the latest request (issue 62)")
                }
                for transaction in declined {
                    #expect(rows.values.filter { $0.transaction == transaction }.count == 2, "a request after Apple's decision is a new one")
                }

                // The team answers one transaction's open request; Apple's next repeat changes nothing.
                let everDeclined = Set(declines.compactMap(\.transaction.transactionId))
                let open = try #require(firsts.values.filter { !everDeclined.contains($0.transaction.transactionId!) }.max { $0.signedDate < $1.signedDate })
                let transaction = try #require(open.transaction.transactionId)
                try await client.query("UPDATE app_store.consumption_requests SET answered_date = now() WHERE transaction_id = \(transaction)")
                var repeatRequest = open
                repeatRequest.uuid = UUID().uuidString.lowercased()
                repeatRequest.signedDate = open.signedDate + 3 * 3_600_000
                let ingest = NotificationIngest(verifier: try harness.verifier(), store: store)
                #expect(try await ingest.ingest(signedPayloads: [try harness.api.signNotification(repeatRequest)]) == 1)
                let after = try await Self.allRows(client).filter { $0.value.transaction == transaction }
                #expect(after.count == 1 && after.values.allSatisfy(\.answered), "still one request, answered: \(after)")
            }
        }
    }

    static func webhookUUIDs(_ client: PostgresClient) async throws -> Set<String> {
        var found: Set<String> = []
        for try await uuid in try await client.query("SELECT notification_uuid::text FROM app_store.notifications WHERE source = 'webhook'").decode(String.self) {
            found.insert(uuid)
        }
        return found
    }

    @Test func theHourlyCheckFindsARefundRequestMissedWithinItsHourAndRecordsOnlyRefundRequests() async throws {
        let harness = try RecoveryHarness(customers: 150, seed: 62, outageHours: 60)
        let missed = harness.scenario.missedNotifications.filter { $0.type == .consumptionRequest }
        let latest = try #require(missed.max { $0.signedDate < $1.signedDate })
        let sent = Date(timeIntervalSince1970: Double(latest.signedDate) / 1000)
        let firstStart = harness.scenario.configuration.now.addingTimeInterval(-harness.scenario.configuration.history - 3600)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let apiClient = try harness.client(baseURL)
                func check(at present: Date) async throws -> RecoveryReport {
                    let run = ReconciliationRun(
                        client: apiClient, verifier: try harness.verifier(), store: store, databaseURL: url, logger: harness.logger, now: { present }
                    )
                    return RecoveryReport(
                        try await run.execute(
                            .init(
                                kind: .consumptionRequests, window: .nightly(firstStart: firstStart, overlap: 3600, settle: 60), mode: .apply, repair: false,
                                onlyTypes: [.consumptionRequest]
                            )
                        )
                    )
                }
                // The check of the hour before Apple sent it, then the check of the hour after.
                let before = try await check(at: sent.addingTimeInterval(-600))
                #expect(before.run.plan?.priorityQueries == ["CONSUMPTION_REQUEST (no subtype)"] && before.run.plan?.remainder == "none")
                var recorded = Set(try await Self.rows(client).keys)
                #expect(!recorded.contains(latest.uuid))
                #expect(missed.filter { $0.signedDate < latest.signedDate - 700_000 }.allSatisfy { recorded.contains($0.uuid) })
                let after = try await check(at: sent.addingTimeInterval(3000))
                recorded = Set(try await Self.rows(client).keys)
                #expect(recorded.contains(latest.uuid), "found within its hour")
                #expect(missed.allSatisfy { recorded.contains($0.uuid) })
                #expect(after.missed.filter { $0.notificationUUID == latest.uuid }.first?.answerBy != nil)
                let window = try #require(after.run.window)
                let previousEnd = try #require(before.run.window.flatMap { try? Date($0.end, strategy: .iso8601) })
                let start = try #require(try? Date(window.start, strategy: .iso8601))
                #expect(start.timeIntervalSince(previousEnd) == -3600, "from the last check's end less the overlap")
                // Nothing but refund requests, and no nightly progress: the nightly's window is untouched.
                #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.notifications WHERE source = 'history' AND notification_type <> 'CONSUMPTION_REQUEST'") == 0)
                #expect(try await store.lastSuccessfulRun(kind: .nightly) == nil)
                #expect(try await store.lastSuccessfulRun(kind: .consumptionRequests) != nil)
                #expect(try await store.lastSuccessfulRun() == nil, "status's last successful run is not the hourly check")
            }
        }
    }
}
