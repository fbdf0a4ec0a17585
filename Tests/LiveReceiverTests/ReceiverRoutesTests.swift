import AppStoreSimulator
import Decisions
import Foundation
import Hummingbird
import HummingbirdTesting
import Ledger
import LiveReceiver
import Logging
import NIOCore
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

/// `serve`'s routes, in process: the application `serve` runs (its routes and its services: the
/// database client, the batch writers), driven by HummingbirdTesting without a socket, against a
/// real ledger. The end-to-end tests of the binary (ServeCommandTests, ServeLimitsTests) cover
/// the listener, the limits on connections and the signals.
@Suite("serve's routes in process")
struct ReceiverRoutesTests {
    static func body(_ jws: String) -> ByteBuffer {
        ByteBuffer(string: #"{"signedPayload":"\#(jws)"}"#)
    }

    /// Runs `test` against the application of a fresh ledger.
    static func withApplication(
        _ harness: RecoveryHarness, metrics: ServeMetrics = ServeMetrics(), health: LedgerReadCache<Int> = LedgerReadCache(interval: .zero),
        forwardTo: DeliveryTarget? = nil, forwardCounts: LedgerReadCache<DeliveryCounts> = LedgerReadCache(interval: .zero),
        _ test: @escaping @Sendable (any TestClientProtocol, PostgresClient) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshLedger { ledger, url in
            let logger = harness.logger
            let database = LedgerDatabase.client(url, logger: logger)
            let store = LedgerStore(client: database, logger: logger)
            let verifier = try harness.verifier()
            let ingest = NotificationIngest(verifier: verifier, store: store, deliverTo: forwardTo?.key)
            let forwarders = forwardTo.map {
                [verifier.configuration.pair: NotificationForwarder(store: store, target: $0, policy: DeliveryPolicy(), logger: logger)]
            } ?? [:]
            // Generous time limits: under the whole suite on two cores, the database may take
            // seconds to answer, and these tests are about the routes, not the deadlines
            // (BackpressureTests and ServeLimitsTests are).
            var limits = BatchedIngest.Limits()
            (limits.wait, limits.write) = (.seconds(60), .seconds(60))
            let batched = BatchedIngest(ingest: ingest, limits: limits)
            let receiver = NotificationReceiver(ingest: ingest, batched: batched, deadline: .seconds(120))
            let routes = ReceiverRoutes(
                path: "/apple/notifications", receiver: receiver, forwarders: forwarders, metrics: metrics,
                database: database, logger: logger, inFlight: RequestsInFlight(maximum: 8, readingBytes: 1 << 20), bodyTimeout: .seconds(5),
                ledgerGauges: LedgerGaugeCache(interval: .zero), health: health, forwardCounts: forwardCounts
            )
            let application = ReceiverApplication(routes, batched: batched, settings: ReceiverSettings(), logger: logger)
            try await application.application.test(.router) { client in try await test(client, ledger) }
        }
    }

    @Test func aGenuineNotificationIsAnswered200OnlyOnceItIsInTheLedgerAndItsRetryToo() async throws {
        let harness = try RecoveryHarness(customers: 3, seed: 71)
        let notification = try #require(harness.scenario.notifications.first)
        let jws = try harness.api.signNotification(notification)
        try await Self.withApplication(harness) { client, ledger in
            let first = try await client.execute(uri: "/apple/notifications", method: .post, body: Self.body(jws))
            #expect(first.status == .ok)
            let uuid = try #require(UUID(uuidString: notification.uuid))
            var count = 0
            for try await value in try await ledger.query("SELECT count(*)::int FROM app_store.notifications WHERE notification_uuid = \(uuid)").decode(Int.self) {
                count = value
            }
            #expect(count == 1)
            let retry = try await client.execute(uri: "/apple/notifications", method: .post, body: Self.body(jws))
            #expect(retry.status == .ok, "Apple's retry of a delivery that did arrive")
        }
    }

    @Test func aForgedOrMalformedBodyIsAnswered400AndNeverApplied() async throws {
        let harness = try RecoveryHarness(customers: 3, seed: 72)
        let jws = try harness.api.signNotification(try #require(harness.scenario.notifications.first))
        let parts = jws.split(separator: ".")
        let forged = "\(parts[0]).\(parts[1].dropLast(4))AAAA.\(parts[2])"
        try await Self.withApplication(harness) { client, ledger in
            #expect(try await client.execute(uri: "/apple/notifications", method: .post, body: Self.body(forged)).status == .badRequest)
            #expect(try await client.execute(uri: "/apple/notifications", method: .post, body: ByteBuffer(string: "not json")).status == .badRequest)
            let tooLarge = ByteBuffer(repeating: UInt8(ascii: "a"), count: NotificationReceiver.maximumBodyBytes + 1)
            #expect(try await client.execute(uri: "/apple/notifications", method: .post, body: tooLarge).status == .badRequest)
            var applied = -1
            for try await value in try await ledger.query("SELECT count(*)::int FROM app_store.notifications").decode(Int.self) { applied = value }
            #expect(applied == 0)
            var kept = -1
            for try await value in try await ledger.query("SELECT count(*)::int FROM app_store.rejected_payloads").decode(Int.self) { kept = value }
            #expect(kept == 1, "the forged payload is kept for the operator")
        }
    }

    /// What the alerts need wherever the jobs run (a CronJob has no textfile collector): /metrics
    /// reads from the ledger, at each scrape, when each scheduled kind of run last succeeded for
    /// each configured App Store, the refund requests still to answer with the soonest deadline,
    /// and the subscriptions Apple owes a notification past due (issue 64); nothing for an App
    /// Store not configured, nothing answered or past its deadline.
    @Test func theMetricsTellTheLastSuccessesAndTheRefundRequestsStillToAnswerFromTheLedger() async throws {
        let harness = try RecoveryHarness(customers: 1, seed: 74)
        let pair = harness.pair
        let metrics = ServeMetrics(pairs: [pair])
        try await Self.withApplication(harness, metrics: metrics) { client, ledger in
            let (bundle, environment) = (pair.bundleId, pair.environment.rawValue)
            let now = Date()
            let succeeded = Date(timeIntervalSince1970: (now.timeIntervalSince1970 - 7_200).rounded())
            let failedLater = Date(timeIntervalSince1970: (now.timeIntervalSince1970 - 600).rounded())
            let checked = Date(timeIntervalSince1970: (now.timeIntervalSince1970 - 1_800).rounded())
            let nextDeadline = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + 3_600).rounded())
            try await ledger.query(
                """
                INSERT INTO app_store.runs (run_id, kind, bundle_id, environment, finished_at, outcome) VALUES
                    (gen_random_uuid(), 'nightly', \(bundle), \(environment), \(succeeded), 'succeeded'),
                    (gen_random_uuid(), 'nightly', \(bundle), \(environment), \(failedLater), 'failed'),
                    (gen_random_uuid(), 'consumption-requests', \(bundle), \(environment), \(checked), 'succeeded_with_rejections'),
                    (gen_random_uuid(), 'nightly', 'com.example.other', \(environment), \(now), 'succeeded')
                """)
            try await ledger.query(
                """
                INSERT INTO app_store.consumption_requests (notification_uuid, environment, bundle_id, original_transaction_id, sent_date,
                    deadline_date, answered_date) VALUES
                    (gen_random_uuid(), \(environment), \(bundle), '1', \(now), \(nextDeadline), NULL),
                    (gen_random_uuid(), \(environment), \(bundle), '2', \(now), \(nextDeadline.addingTimeInterval(14_400)), NULL),
                    (gen_random_uuid(), \(environment), \(bundle), '3', \(now), \(nextDeadline.addingTimeInterval(-1_800)), \(now)),
                    (gen_random_uuid(), \(environment), \(bundle), '4', \(now), \(now.addingTimeInterval(-60)), NULL),
                    (gen_random_uuid(), \(environment), 'com.example.other', '5', \(now), \(nextDeadline), NULL)
                """)
            // Apple owes two of this App Store's subscriptions a notification more than an hour past
            // due, a third is due in the future, another App Store's is not configured.
            try await ledger.query(
                """
                INSERT INTO app_store.subscriptions (original_transaction_id, environment, bundle_id, last_signed_date, status, expires_date, due_at, expected) VALUES
                    ('11', \(environment), \(bundle), \(now), 1, \(now.addingTimeInterval(-7_200)), \(now.addingTimeInterval(-7_200)), 'renewal_or_failure'),
                    ('12', \(environment), \(bundle), \(now), 4, \(now.addingTimeInterval(-86_400)), \(now.addingTimeInterval(-5_400)), 'grace_outcome'),
                    ('13', \(environment), \(bundle), \(now), 1, \(now.addingTimeInterval(86_400)), \(now.addingTimeInterval(86_400)), 'renewal_or_failure'),
                    ('14', \(environment), 'com.example.other', \(now), 1, \(now.addingTimeInterval(-7_200)), \(now.addingTimeInterval(-7_200)), 'renewal_or_failure')
                """)
            let labels = "bundle_id=\"\(bundle)\",environment=\"\(environment)\""
            // The ledger's figures are left out of a scrape the ledger does not answer within 3 s
            // (under the whole suite on two cores it may not): scrape until one it answered.
            func scrape() async throws -> String {
                var text = ""
                for _ in 0..<20 {
                    text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                    if text.contains("appstore_reconcile_consumption_requests_unanswered{") { break }
                }
                return text
            }
            let text = try await scrape()
            #expect(text.contains("appstore_reconcile_last_success_timestamp_seconds{kind=\"nightly\",\(labels)} \(succeeded.timeIntervalSince1970)\n"), "\(text)")
            #expect(text.contains("appstore_reconcile_last_success_timestamp_seconds{kind=\"consumption-requests\",\(labels)} \(checked.timeIntervalSince1970)\n"))
            #expect(text.contains("appstore_reconcile_consumption_requests_unanswered{\(labels)} 2.0\n"), "two unanswered ahead of their deadline")
            #expect(text.contains("appstore_reconcile_consumption_request_next_deadline_timestamp_seconds{\(labels)} \(nextDeadline.timeIntervalSince1970)\n"))
            #expect(text.contains("appstore_reconcile_overdue_subscriptions{\(labels)} 2.0\n"), "two overdue, one not yet due")
            #expect(!text.contains("com.example.other"), "an App Store not configured adds no series")

            try await ledger.query("UPDATE app_store.consumption_requests SET answered_date = now() WHERE bundle_id = \(bundle)")
            // The missed notifications recorded: nothing is owed any more.
            try await ledger.query("UPDATE app_store.subscriptions SET status = 2, due_at = NULL, expected = NULL WHERE original_transaction_id IN ('11', '12')")
            let after = try await scrape()
            #expect(after.contains("appstore_reconcile_consumption_requests_unanswered{\(labels)} 0.0\n"))
            #expect(after.contains("appstore_reconcile_overdue_subscriptions{\(labels)} 0.0\n"))
            #expect(!after.contains("appstore_reconcile_consumption_request_next_deadline_timestamp_seconds{"), "no deadline left: no series, not its last value")
        }
    }

    /// /healthz is public: a burst of probes reads the database once per interval, not once
    /// each (the pool it reads through is the notifications'). Within the interval a ledger whose
    /// migrations were taken away still answers as it was read; a read of its own sees them gone.
    @Test func aBurstOfHealthProbesReadsTheDatabaseOncePerInterval() async throws {
        let harness = try RecoveryHarness(customers: 1, seed: 75)
        let health = LedgerReadCache<Int>(interval: .seconds(3600), retryAfterFailure: .zero)
        try await Self.withApplication(harness, health: health) { client, ledger in
            // A wait, not a bound: under the whole suite on two cores the first reads missed their 3 s for over 30 s.
            var first: [HTTPResponse.Status] = []
            let patience = Date().addingTimeInterval(120)
            while first.last != .ok, Date() < patience { first.append(try await client.execute(uri: "/healthz", method: .get).status) }
            #expect(first.last == .ok)
            try await ledger.query("DELETE FROM app_store.schema_migrations WHERE version > 1")
            for _ in 0..<50 { #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok, "the read of an hour ago") }
            let fresh = LedgerReadCache<Int>(interval: .zero)
            let applied = await fresh.value { (try? await Migrator().applied(ledger, logger: harness.logger).count) ?? nil }
            #expect(applied == 1, "the next read sees the migrations gone")
        }
    }

    /// With `--forward-to`, /metrics counts the notifications not yet forwarded from the ledger:
    /// a burst of scrapes reads them once per interval, not once each. Within the interval a
    /// ledger whose deliveries table was taken away still shows the count as it was read.
    @Test func aBurstOfScrapesCountsTheForwardsOncePerInterval() async throws {
        let harness = try RecoveryHarness(customers: 1, seed: 76)
        let counts = LedgerReadCache<DeliveryCounts>(interval: .seconds(3600), retryAfterFailure: .zero)
        let target = try DeliveryTarget("http://127.0.0.1:9/handler")
        try await Self.withApplication(harness, forwardTo: target, forwardCounts: counts) { client, ledger in
            var pages: [String] = []
            while !(pages.last ?? "").contains("appstore_reconcile_serve_pending_forwards 0"), pages.count < 10 {
                pages.append(String(buffer: try await client.execute(uri: "/metrics", method: .get).body))
            }
            #expect(pages.last?.contains("appstore_reconcile_serve_pending_forwards 0") == true)
            try await ledger.query("ALTER TABLE app_store.deliveries RENAME TO deliveries_taken_away")
            for _ in 0..<50 {
                let page = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(page.contains("appstore_reconcile_serve_pending_forwards 0"), "the count of an hour ago")
            }
            let store = LedgerStore(client: ledger, logger: harness.logger)
            await #expect(throws: (any Error).self, "a read now fails: the scrapes above did not read") {
                try await store.deliveryCounts(to: target.key)
            }
            try await ledger.query("ALTER TABLE app_store.deliveries_taken_away RENAME TO deliveries")
        }
    }

    @Test func theProbesAndTheMetricsAnswerAndAnythingElseIs404Or405() async throws {
        let harness = try RecoveryHarness(customers: 1, seed: 73)
        try await Self.withApplication(harness) { client, _ in
            #expect(try await client.execute(uri: "/livez", method: .get).status == .ok)
            // /healthz gives the database 3 s; under load it may answer 503 first, then 200.
            var health: [HTTPResponse.Status] = []
            while health.last != .ok, health.count < 10 { health.append(try await client.execute(uri: "/healthz", method: .get).status) }
            #expect(health.last == .ok, "every migration applied: \(health.map(\.code))")
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.status == .ok)
            #expect(String(buffer: metrics.body).contains("# TYPE appstore_reconcile_serve_requests_total counter"))
            #expect(try await client.execute(uri: "/elsewhere", method: .get).status == .notFound)
            let wrongMethod = try await client.execute(uri: "/apple/notifications", method: .get)
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.headers[.allow] == "POST")
        }
    }
}
