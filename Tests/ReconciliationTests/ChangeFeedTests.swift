import AppStoreSimulator
import Foundation
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import Synchronization
import TestSupport
import Testing

/// The change feed (`app_store.changes`, migration 0007) against an independent witness: row
/// triggers the test installs on `subscriptions` and `transactions` record every row the
/// database actually inserted or updated, old and new, as `to_jsonb` sees them. The feed must
/// hold exactly one row per witnessed change, with the same before and after.
@Suite("The change feed against a real PostgreSQL")
struct ChangeFeedTests {
    /// The witness, and the feed's documented form of a row (its columns; times as UNIX ms under
    /// `_ms`; absent values left out; the stored JWS and the bookkeeping times not repeated),
    /// written here from the catalog rather than from the code's column tables. What the tool
    /// derives from a row (`due_at`, `expected`: migration 0029; `sample_key`: 0030) is not what the row says: the
    /// feed leaves it out, and so does the witness.
    static let witnessSQL = [
        "CREATE TABLE public.witness (seq bigserial PRIMARY KEY, tbl text NOT NULL, key text NOT NULL, old jsonb, new jsonb NOT NULL)",
        """
        CREATE FUNCTION public.witness() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO public.witness (tbl, key, old, new)
            VALUES (regexp_replace(TG_TABLE_NAME, '_rows$', 's'), to_jsonb(NEW) ->> TG_ARGV[0], CASE WHEN TG_OP = 'UPDATE' THEN to_jsonb(OLD) END, to_jsonb(NEW));
            RETURN NULL;
        END $$
        """,
        "CREATE TRIGGER witness AFTER INSERT OR UPDATE ON app_store.subscriptions FOR EACH ROW EXECUTE FUNCTION public.witness('original_transaction_id')",
        // On the table under the readers' view (migration 0021), named for the view in the witness.
        "CREATE TRIGGER witness AFTER INSERT OR UPDATE ON app_store.transaction_rows FOR EACH ROW EXECUTE FUNCTION public.witness('transaction_id')",
        "CREATE TRIGGER witness AFTER INSERT OR UPDATE ON app_store.consumption_requests FOR EACH ROW EXECUTE FUNCTION public.witness('notification_uuid')",
        """
        CREATE FUNCTION public.feed_form(r jsonb, tbl regclass) RETURNS jsonb LANGUAGE sql AS $$
            SELECT jsonb_object_agg(
                CASE WHEN a.atttypid = 'timestamptz'::regtype THEN regexp_replace(a.attname, '_date$', '_ms') ELSE a.attname END,
                CASE WHEN a.atttypid = 'timestamptz'::regtype
                    THEN to_jsonb(round(extract(epoch FROM (r ->> a.attname)::timestamptz) * 1000)::bigint) ELSE r -> a.attname END)
            FROM pg_attribute a
            WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
                AND a.attname NOT IN ('signed_transaction', 'recorded_at', 'updated_at', 'renewal_signed_date', 'due_at', 'expected', 'sample_key')
                AND r -> a.attname <> 'null'::jsonb
        $$
        """,
    ]

    static func lines(_ client: PostgresClient, _ sql: String) async throws -> [String] {
        var found: [String] = []
        for try await line in try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger).decode(String.self) {
            found.append(line)
        }
        return found
    }

    /// Every witnessed change of content, per row key in the order made: "table key: old → new".
    /// An update that moved only the signing time (`signed_ms`, `last_signed_ms` in the feed's
    /// form) is a write the witness sees but not a change of what the row says.
    static func witnessed(_ client: PostgresClient) async throws -> [String] {
        try await lines(
            client,
            """
            SELECT tbl || ' ' || key || ': ' || coalesce(old_form::text, 'none') || ' → ' || new_form::text
            FROM (
                SELECT seq, tbl, key, public.feed_form(old, ('app_store.' || tbl)::regclass) AS old_form,
                    public.feed_form(new, ('app_store.' || tbl)::regclass) AS new_form
                FROM public.witness
            ) w
            WHERE old_form IS NULL OR old_form - 'signed_ms' - 'last_signed_ms' <> new_form - 'signed_ms' - 'last_signed_ms'
            ORDER BY tbl, key, seq
            """
        )
    }

    /// Every row write the witness saw, content changed or not.
    static func writes(_ client: PostgresClient) async throws -> Int {
        try await count(client, "SELECT count(*) FROM public.witness")
    }

    /// Every change-feed row, in the same form and order.
    static func fed(_ client: PostgresClient) async throws -> [String] {
        try await lines(
            client,
            """
            SELECT kind || 's ' || CASE kind WHEN 'subscription' THEN original_transaction_id
                    WHEN 'transaction' THEN after ->> 'transaction_id' ELSE after ->> 'notification_uuid' END || ': '
                || coalesce(before::text, 'none') || ' → ' || after::text
            FROM app_store.changes
            ORDER BY kind, CASE kind WHEN 'subscription' THEN original_transaction_id
                WHEN 'transaction' THEN after ->> 'transaction_id' ELSE after ->> 'notification_uuid' END, id
            """
        )
    }

    static func count(_ client: PostgresClient, _ sql: String) async throws -> Int {
        try await BackendLedgerTests.count(client, sql)
    }

    @Test func everyChangeOfIngestPassOneAndPassTwoHasOneFeedRowWithTheRowBeforeAndAfter() async throws {
        let (harness, _, _, _) = try RepairTests.silencedHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                for statement in Self.witnessSQL { try await client.query(PostgresQuery(unsafeSQL: statement), logger: harness.logger) }
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await RepairTests.bothPasses(harness, store, url, try harness.client(baseURL))
                #expect(report.counts.applied > 0 && report.counts.customersRepaired > 0, "the run changed rows in both passes")

                let witnessed = try await Self.witnessed(client)
                let fed = try await Self.fed(client)
                #expect(witnessed.count > 100)
                #expect(fed.count == witnessed.count)
                let same = fed == witnessed
                #expect(same, "first difference: \(zip(fed, witnessed).first { $0 != $1 }.map { "\($0.0)\nwitness: \($0.1)" } ?? "")")

                // Who made each change: the live notifications, pass 1 and pass 2, each with what caused it.
                let runs = try await Self.lines(client, "SELECT run_id::text FROM app_store.runs")
                #expect(runs.count == 1)
                let run = runs.first ?? ""
                for cause in ["webhook", "history", "repair"] {
                    #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = '\(cause)'") > 0, "\(cause)")
                }
                #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = 'webhook' AND run_id IS NULL AND notification_uuid IN (SELECT notification_uuid FROM app_store.notifications WHERE source = 'webhook')") == Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = 'webhook'"))
                #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = 'history' AND run_id = '\(run)' AND notification_uuid IN (SELECT notification_uuid FROM app_store.notifications WHERE source = 'history')") == Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = 'history'"))
                #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = 'repair' AND run_id = '\(run)' AND notification_uuid IS NULL") == Self.count(client, "SELECT count(*) FROM app_store.changes WHERE cause = 'repair'"))
                // The row's own facts, for a backend that follows by its token.
                #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes WHERE app_account_token IS DISTINCT FROM (after ->> 'app_account_token')::uuid OR environment IS DISTINCT FROM after ->> 'environment'") == 0)
                #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes WHERE app_account_token IS NOT NULL") > 0)

                // A second run changes nothing, and so adds nothing to the feed.
                let before = fed.count
                _ = try await RepairTests.bothPasses(harness, store, url, try harness.client(baseURL))
                #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes") == before)
                #expect(try await Self.witnessed(client).count == before)
            }
        }
    }

    /// Apple signs every notification anew, so most say again what the ledger holds. One that
    /// does moves the signing time (a version signed in between is then known to be older) and
    /// adds nothing to the feed; one that changes a field adds exactly one row, with the field
    /// before and after.
    @Test func aNotificationWhoseContentEqualsTheRowEmitsNoFeedRowAndOneThatChangesAFieldEmitsExactlyOne() async throws {
        let harness = try RecoveryHarness(customers: 12, seed: 7)
        let first = try #require(harness.scenario.notifications.first { $0.renewalInfo?.autoRenewStatus != nil && $0.transaction.type == .autoRenewable })
        @Sendable func signed(_ base: Scenario.Notification, after minutes: Int64, autoRenewStatus: Int? = nil) throws -> String {
            var notification = base
            notification.uuid = UUID().uuidString.lowercased()
            notification.signedDate = base.signedDate + minutes * 60_000
            notification.transaction.signedDate = notification.signedDate
            notification.renewalInfo?.signedDate = notification.signedDate
            if let autoRenewStatus { notification.renewalInfo?.autoRenewStatus = autoRenewStatus }
            return try harness.api.signNotification(notification)
        }
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            func feed() async throws -> [String] {
                try await Self.lines(client, "SELECT kind || ' ' || coalesce((before ->> 'auto_renew_status'), '-') || ' → ' || coalesce((after ->> 'auto_renew_status'), '-') FROM app_store.changes ORDER BY id")
            }
            func signingTimes() async throws -> [String] {
                try await Self.lines(client, """
                    SELECT round(extract(epoch FROM signed_date) * 1000)::text FROM app_store.transactions WHERE transaction_id = '\(first.transaction.transactionId ?? "")'
                    UNION ALL SELECT round(extract(epoch FROM last_signed_date) * 1000)::text FROM app_store.subscriptions WHERE original_transaction_id = '\(first.originalTransactionId)'
                    """)
            }
            let status = try #require(first.renewalInfo?.autoRenewStatus)
            _ = try await ingest.ingest(signedPayloads: [try signed(first, after: 0)])
            #expect(try await feed().count == 2, "the transaction and the subscription are new")

            _ = try await ingest.ingest(signedPayloads: [try signed(first, after: 60)])
            #expect(try await feed().count == 2, "the same content signed an hour later is no change")
            let later = String(first.signedDate + 60 * 60_000)
            #expect(try await signingTimes() == [later, later], "but its signing time is kept")

            // Signed between the two, saying something else: older than what the ledger holds.
            _ = try await ingest.ingest(signedPayloads: [try signed(first, after: 30, autoRenewStatus: 1 - status)])
            #expect(try await feed().count == 2, "a version signed before the kept time changes nothing")

            _ = try await ingest.ingest(signedPayloads: [try signed(first, after: 120, autoRenewStatus: 1 - status)])
            let fed = try await feed()
            #expect(fed.count == 3)
            #expect(fed.last == "subscription \(status) → \(1 - status)", "one row, for the subscription whose field changed")
        }
    }

    /// Migration 0010 fixes each table's columns in its trigger function, as its header and the
    /// README say: a column the team adds is in the feed once `create_change_triggers()` has run
    /// again; one it drops makes writes fail until then, and work after.
    @Test func aColumnTheTeamAddsOrDropsIsFollowedByTheFeedOnceTheTriggersAreWrittenAgain() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let logger = TestDatabase.logger
            @Sendable func write(_ sql: String) async throws {
                try await client.withTransaction(logger: logger) { connection in
                    try await connection.query(PostgresQuery(unsafeSQL: #"SELECT set_config('app_store.change_context', '{"cause":"webhook"}', true)"#), logger: logger)
                    try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
                }
            }
            func notes() async throws -> [String] {
                try await Self.lines(
                    client, "SELECT coalesce(before ->> 'team_note', '-') || ' → ' || coalesce(after ->> 'team_note', '-') FROM app_store.changes ORDER BY id")
            }
            try await write("INSERT INTO app_store.subscriptions (bundle_id, environment, original_transaction_id, last_signed_date) VALUES ('com.example.simulated', 'Sandbox', '1000000000000001', now())")
            try await client.query("ALTER TABLE app_store.subscriptions ADD COLUMN team_note text", logger: logger)
            try await write("UPDATE app_store.subscriptions SET team_note = 'first'")
            // Before the triggers are written again the column is not in the feed's form, so the
            // update says nothing new and makes no feed row (migration 0014).
            #expect(try await notes() == ["- → -"], "not in the feed before the triggers are written again")
            try await client.query("SELECT app_store.create_change_triggers()", logger: logger)
            try await write("UPDATE app_store.subscriptions SET team_note = 'second'")
            #expect(try await notes() == ["- → -", "first → second"])

            try await client.query("ALTER TABLE app_store.subscriptions DROP COLUMN team_note", logger: logger)
            await #expect(throws: (any Error).self) { try await write("UPDATE app_store.subscriptions SET status = 2") }
            try await client.query("SELECT app_store.create_change_triggers()", logger: logger)
            try await write("UPDATE app_store.subscriptions SET status = 2")
            #expect(try await Self.count(client, "SELECT count(*) FROM app_store.changes") == 3)
        }
    }

    /// Many writers commit at once while a reader follows by id: because ids are given in commit
    /// order, the reader, keeping only the last id it saw, misses none (a plain sequence lets a
    /// transaction that took a smaller id commit after one with a larger id the reader already passed).
    @Test func aReaderFollowingByIdMissesNoChangeWhileManyWritersCommitAtOnce() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let writers = 8, batches = 80
            let writing = Collected()
            writing.add([1])
            let reader = Task {
                var seen: [Int64] = []
                var cursor: Int64 = 0
                while !writing.ids.isEmpty {
                    let collected = Collected()
                    cursor = try await ChangeFeed.stream(client: client, after: cursor, limit: nil, follow: false, logger: TestDatabase.logger) { lines in
                        collected.add(lines.map(\.id))
                    }
                    seen += collected.ids
                    try? await Task.sleep(for: .milliseconds(1))
                }
                return seen
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        for index in 0..<batches {
                            var batch = LedgerBatch(cause: .webhook)
                            var row = SubscriptionRecord(
                                originalTransactionId: String(1_000_000 + writer * 1_000 + index), productId: "p", status: 1, expiresDate: nil,
                                autoRenewStatus: 1, autoRenewProductId: nil, isInBillingRetry: false, gracePeriodExpiresDate: nil,
                                lastSignedDate: Date(timeIntervalSince1970: 1_000)
                            )
                            row.environment = "Sandbox"
                            row.bundleId = "com.example.simulated"
                            batch.subscriptions = [row]
                            _ = try await store.apply(batch, runId: nil)
                        }
                    }
                }
                try await group.waitForAll()
            }
            writing.clear()
            var seen = try await reader.value
            let collected = Collected()
            _ = try await ChangeFeed.stream(client: client, after: seen.last ?? 0, limit: nil, follow: false, logger: TestDatabase.logger) { lines in
                collected.add(lines.map(\.id))
            }
            seen += collected.ids
            let all = try await Self.lines(client, "SELECT c.id::text FROM app_store.changes c ORDER BY c.id").compactMap { Int64($0) }
            #expect(all.count == writers * batches)
            #expect(seen == all, "missed by a reader following by id: \(Set(all).subtracting(seen).count)")
        }
    }

    /// Writers racing on the same customers: each change's `before` is the row the previous change
    /// left (the row as the database updated it, not as the writer's snapshot saw it), and the
    /// last change's `after` is the row as it is.
    @Test func changesOfTheSameCustomerByConcurrentWritersChainBeforeToAfter() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            let clock = Collected()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        for index in 0..<40 {
                            clock.add([1])
                            let tick = Double(clock.ids.count)
                            var batch = LedgerBatch(cause: writer % 2 == 0 ? .webhook : .history)
                            var row = SubscriptionRecord(
                                originalTransactionId: String(5_000 + index % 3), productId: "p\(writer)", status: 1 + index % 5, expiresDate: nil,
                                autoRenewStatus: writer % 2, autoRenewProductId: nil, isInBillingRetry: false, gracePeriodExpiresDate: nil,
                                lastSignedDate: Date(timeIntervalSince1970: 1_000 + tick)
                            )
                            row.environment = "Sandbox"
                            row.bundleId = "com.example.simulated"
                            batch.subscriptions = [row]
                            _ = try await store.apply(batch, runId: nil)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let chains = try await Self.lines(
                client,
                """
                SELECT original_transaction_id || '|' || coalesce(before::text, 'none') || '|' || after::text
                FROM app_store.changes ORDER BY original_transaction_id, id
                """
            )
            #expect(chains.count >= 3)
            var previous: [String: String] = [:]
            var broken = 0
            for line in chains {
                let parts = line.split(separator: "|", maxSplits: 2).map(String.init)
                if parts[1] != (previous[parts[0]] ?? "none") { broken += 1 }
                previous[parts[0]] = parts[2]
            }
            #expect(broken == 0, "a change whose before is not the previous change's after")
            let rows = try await Self.lines(
                client, "SELECT original_transaction_id || '|' || public_row::text FROM (SELECT original_transaction_id, app_store.change_row(to_jsonb(s) - 'sample_key' - 'due_at' - 'expected', ARRAY['expires_date', 'grace_period_expires_date', 'last_signed_date']) AS public_row FROM app_store.subscriptions s) x"
            )
            for row in rows {
                let parts = row.split(separator: "|", maxSplits: 1).map(String.init)
                #expect(previous[parts[0]] == parts[1], "the last change leaves the row as it is")
            }
        }
    }
}

/// Ids handed over by `ChangeFeed.stream`'s callback.
final class Collected: Sendable {
    private let stored = Mutex<[Int64]>([])
    func add(_ ids: [Int64]) { stored.withLock { $0 += ids } }
    var ids: [Int64] { stored.withLock { $0 } }
    func clear() { stored.withLock { $0 = [] } }
}
