import Crypto
@testable import Decisions
import Foundation
import Ledger
import Logging
import PostgresNIO
import TestSupport
import ThrowawayPostgres
import Testing

@Suite("Migrations against a real PostgreSQL")
struct MigrationTests {
    let logger = TestDatabase.logger

    /// Every column of the app_store schema, as "table.column type nullability", in order.
    static func schemaShape(_ client: PostgresClient) async throws -> [String] {
        let rows = try await client.query(
            """
            SELECT table_name, column_name, data_type, is_nullable
            FROM information_schema.columns WHERE table_schema = 'app_store'
            ORDER BY table_name, ordinal_position
            """
        )
        var shape: [String] = []
        for try await (table, column, type, nullable) in rows.decode((String, String, String, String).self) {
            shape.append("\(table).\(column) \(type) \(nullable)")
        }
        return shape
    }

    static func appliedCount(_ client: PostgresClient) async throws -> Int {
        let rows = try await client.query("SELECT count(*) FROM app_store.schema_migrations")
        for try await count in rows.decode(Int.self) { return count }
        return -1
    }

    @Test func migrateCreatesTheLedgerTablesInAnEmptyDatabase() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            let outcome = try await Migrator().migrate(client, logger: logger)
            #expect(outcome.applied == Migration.bundled.map(\.name))
            #expect(outcome.alreadyApplied == 0)
            let shape = try await Self.schemaShape(client)
            for column in [
                "notification_rows.notification_uuid uuid NO", "notification_rows.subtype text YES",
                "notification_rows.signed_date timestamp with time zone NO", "notification_rows.source text NO",
                "notification_rows.signed_payload_key bytea YES", "transaction_rows.signed_transaction_key bytea YES",
                // The readers' names (views since 0021), with the same columns in the same order.
                "notifications.notification_uuid uuid YES", "notifications.signed_payload text YES",
                "transactions.signed_transaction text YES", "subscriptions.status smallint YES",
                "subscriptions.last_signed_date timestamp with time zone NO", "history_revisions.revision text NO",
                "runs.run_id uuid NO", "rejected_payloads.reason text NO", "run_subscription_changes.before jsonb YES",
                "run_subscription_changes.after jsonb NO",
            ] {
                #expect(shape.contains(column), "missing \(column)")
            }
            // Signed payloads are compressed with lz4 (this server has it: Debian's is built --with-lz4).
            let rows = try await client.query(
                """
                SELECT attrelid::regclass::text || '.' || attname, attcompression::text FROM pg_attribute
                WHERE attname IN ('signed_payload', 'signed_transaction') AND attrelid::regclass::text LIKE 'app_store.%' ORDER BY 1
                """
            )
            var compression: [String] = []
            for try await (column, method) in rows.decode((String, String).self) { compression.append("\(column) \(method)") }
            #expect(
                compression == [
                    "app_store.notification_rows.signed_payload l", "app_store.notifications.signed_payload ",
                    "app_store.rejected_payloads.signed_payload l", "app_store.transaction_rows.signed_transaction l",
                    "app_store.transactions.signed_transaction ",
                ]
            )
        }
    }

    /// Migration 0011 gives the refund requests a ledger already holds their row, deadline 12 hours
    /// after their signedDate, and a later migrate adds none twice.
    @Test func migration0011BackfillsTheRefundRequestsTheLedgerAlreadyHolds() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 10 }).migrate(client, logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.notifications (notification_uuid, notification_type, subtype, signed_date, environment,
                    original_transaction_id, transaction_id, signed_payload, source)
                VALUES ('6a0c8f1e-0000-4000-8000-00000000000c', 'CONSUMPTION_REQUEST', NULL, '2026-11-24 10:00:00+00', 'Production', '2000', '2001', 'x.y.z', 'webhook'),
                       ('6a0c8f1e-0000-4000-8000-00000000000d', 'DID_RENEW', NULL, '2026-11-24 10:00:00+00', 'Production', '2000', '2001', 'x.y.z', 'webhook')
                """,
                logger: logger
            )
            _ = try await Migrator().migrate(client, logger: logger)
            let rows = try await client.query(
                "SELECT notification_uuid::text, transaction_id, (deadline_date - sent_date)::text FROM app_store.consumption_requests", logger: logger
            )
            var found: [String] = []
            for try await (uuid, transaction, span) in rows.decode((String, String?, String).self) { found.append("\(uuid) \(transaction ?? "") \(span)") }
            #expect(found == ["6a0c8f1e-0000-4000-8000-00000000000c 2001 12:00:00"])
        }
    }

    /// Issue 48, point 4: a ledger whose repeated refund requests each had a row (before 0022)
    /// keeps one per transaction and episode, the first's, with the answered_date the team set on
    /// any of them; requests after Apple's decision stay a request of their own.
    @Test func migration0022KeepsOneRequestPerTransactionAndEpisodeWithItsAnswer() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 21 }).migrate(client, logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.notifications (notification_uuid, notification_type, subtype, signed_date, environment, bundle_id,
                    original_transaction_id, transaction_id, signed_payload, source)
                VALUES ('6a0c8f1e-0000-4000-8000-000000000001', 'CONSUMPTION_REQUEST', NULL, '2026-11-24 10:00:00+00', 'Production', 'app', '2000', '2001', 'x.y.z', 'webhook'),
                       ('6a0c8f1e-0000-4000-8000-000000000002', 'CONSUMPTION_REQUEST', NULL, '2026-11-24 10:30:00+00', 'Production', 'app', '2000', '2001', 'x.y.z', 'webhook'),
                       ('6a0c8f1e-0000-4000-8000-000000000003', 'REFUND_DECLINED', NULL, '2026-11-24 11:00:00+00', 'Production', 'app', '2000', '2001', 'x.y.z', 'webhook'),
                       ('6a0c8f1e-0000-4000-8000-000000000004', 'CONSUMPTION_REQUEST', NULL, '2026-11-24 12:00:00+00', 'Production', 'app', '2000', '2001', 'x.y.z', 'webhook'),
                       ('6a0c8f1e-0000-4000-8000-000000000005', 'CONSUMPTION_REQUEST', NULL, '2026-11-24 12:30:00+00', 'Production', 'app', '2000', '2001', 'x.y.z', 'webhook'),
                       ('6a0c8f1e-0000-4000-8000-000000000006', 'CONSUMPTION_REQUEST', NULL, '2026-11-24 10:00:00+00', 'Sandbox', 'app', '2000', '2001', 'x.y.z', 'webhook')
                """,
                logger: logger
            )
            try await client.query(
                """
                INSERT INTO app_store.consumption_requests (notification_uuid, environment, bundle_id, original_transaction_id, transaction_id,
                    sent_date, deadline_date, answered_date)
                SELECT notification_uuid, environment, bundle_id, original_transaction_id, transaction_id, signed_date, signed_date + interval '12 hours',
                    CASE WHEN notification_uuid = '6a0c8f1e-0000-4000-8000-000000000005' THEN '2026-11-24 13:00:00+00'::timestamptz END
                FROM app_store.notifications WHERE notification_type = 'CONSUMPTION_REQUEST'
                """,
                logger: logger
            )
            _ = try await Migrator().migrate(client, logger: logger)
            let rows = try await client.query(
                "SELECT notification_uuid::text, environment, answered_date IS NOT NULL FROM app_store.consumption_requests ORDER BY 1", logger: logger
            )
            var found: [String] = []
            for try await (uuid, environment, answered) in rows.decode((String, String, Bool).self) { found.append("\(uuid.suffix(2)) \(environment) \(answered)") }
            #expect(found == ["01 Production false", "04 Production true", "06 Sandbox false"])
        }
    }

    /// Rejected payloads written before 0016 and 0017: migration 0017 merges the webhook's
    /// repeats of the same bytes and reason into the oldest row (their counts summed), keeps what
    /// runs recorded, and then counts a repeat on that row. A run resumed over such an old row
    /// gets its whole payload back to read the customer it names (0016 had not recorded it).
    @Test func migration0017MergesTheWebhooksRepeatsAndOldRunRowsKeepTheirPayloadToRead() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 15 }).migrate(client, logger: logger)
            let run = UUID()
            try await client.query(
                "INSERT INTO app_store.runs (run_id, kind, environment, window_start, window_end, dry_run) VALUES (\(run), 'recovery', 'Production', now(), now(), false)",
                logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.rejected_payloads (run_id, source, reason, detail, signed_payload, rejected_at)
                VALUES (NULL, 'webhook', 'wrong_bundle', 'd', 'same.signed.bytes', '2020-11-01'),
                       (NULL, 'webhook', 'wrong_bundle', 'd', 'same.signed.bytes', '2020-11-02'),
                       (NULL, 'webhook', 'wrong_bundle', 'd', 'same.signed.bytes', '2020-11-03'),
                       (NULL, 'webhook', 'wrong_environment', 'd', 'same.signed.bytes', '2020-11-02'),
                       (\(run), 'history', 'wrong_bundle', 'd', 'same.signed.bytes', '2020-11-02'),
                       (\(run), 'history', 'wrong_bundle', 'd', 'same.signed.bytes', '2020-11-03')
                """,
                logger: logger
            )
            _ = try await Migrator().migrate(client, logger: logger)
            let rows = try await client.query(
                "SELECT source, reason, times_seen, last_rejected_at::date::text FROM app_store.rejected_payloads ORDER BY rejection_id", logger: logger)
            var found: [String] = []
            for try await (source, reason, seen, last) in rows.decode((String, String, Int, String).self) { found.append("\(source) \(reason) \(seen) \(last)") }
            #expect(
                found == [
                    "webhook wrong_bundle 3 2020-11-03", "webhook wrong_environment 1 2020-11-02", "history wrong_bundle 1 2020-11-02",
                    "history wrong_bundle 1 2020-11-03",
                ])
            let store = LedgerStore(client: client, logger: logger)
            let earlier = try await store.rejections(ofRuns: [run])
            #expect(earlier.map(\.payloadToRead) == ["same.signed.bytes", "same.signed.bytes"])
        }
    }

    /// Migration 0018 rewrites the deliveries' targets stored as whole URLs into the key the
    /// tool computes (`DeliveryTarget.key`, here its rule restated): no query, a digest in its
    /// place; a URL without a query stays as it was, and a second run changes nothing.
    @Test func migration0018KeysDeliveriesByTheURLWithoutItsQuery() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 17 }).migrate(client, logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.notifications (notification_uuid, notification_type, signed_date, environment, signed_payload, source)
                VALUES ('6a0c8f1e-0000-4000-8000-0000000000aa', 'DID_RENEW', now(), 'Production', 'x.y.z', 'webhook')
                """, logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.deliveries (notification_uuid, target) VALUES
                    ('6a0c8f1e-0000-4000-8000-0000000000aa', 'https://hooks.example.com/apple?token=s3cret'),
                    ('6a0c8f1e-0000-4000-8000-0000000000aa', 'https://hooks.example.com/plain')
                """, logger: logger)
            _ = try await Migrator().migrate(client, logger: logger)
            for statement in Migration.bundled.first(where: { $0.version == 18 })?.statements ?? [] {
                try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            var targets: [String] = []
            for try await target in try await client.query("SELECT target FROM app_store.deliveries ORDER BY target", logger: logger).decode(String.self) {
                targets.append(target)
            }
            let digest = SHA256.hash(data: Array("https://hooks.example.com/apple?token=s3cret".utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
            #expect(targets == ["https://hooks.example.com/apple#query-sha256=\(digest)", "https://hooks.example.com/plain"])
        }
    }

    /// Migration 0014 keys transactions and subscriptions by environment: rows recorded without
    /// one take it from their stored JWS, their notifications or their transactions; then the
    /// same IDs may be stored once per environment. A row whose environment cannot be found stops
    /// the migration with a message and changes nothing.
    @Test func migration0014FillsEveryEnvironmentThenKeysByItOrStopsWithAMessage() async throws {
        let payload = Data(#"{"transactionId":"3001","environment":"Production"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let jws = "eyJhbGciOiJFUzI1NiJ9.\(payload).c2ln"
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 13 }).migrate(client, logger: logger)
            try await client.query(
                """
                INSERT INTO app_store.transactions (transaction_id, original_transaction_id, signed_date, environment, signed_transaction)
                VALUES ('3001', '3000', now(), NULL, \(jws)), ('3002', '3100', now(), NULL, 'x.y.z')
                """,
                logger: logger
            )
            try await client.query(
                """
                INSERT INTO app_store.notifications (notification_uuid, notification_type, signed_date, environment,
                    original_transaction_id, transaction_id, signed_payload, source)
                VALUES ('6a0c8f1e-0000-4000-8000-00000000001a', 'DID_RENEW', now(), 'Sandbox', '3100', '3002', 'x.y.z', 'webhook')
                """,
                logger: logger
            )
            try await client.query("INSERT INTO app_store.subscriptions (original_transaction_id, last_signed_date) VALUES ('3000', now())", logger: logger)
            try await client.query("INSERT INTO app_store.transactions (transaction_id, original_transaction_id, signed_date, signed_transaction) VALUES ('3003', '3999', now(), 'x.y.z')", logger: logger)

            let failure = await #expect(throws: (any Error).self) { _ = try await Migrator().migrate(client, logger: logger) }
            #expect(String(describing: failure).contains("1 rows of app_store.transactions have no environment"), "\(String(describing: failure))")
            #expect(try await Self.appliedCount(client) == 13, "nothing applied")
            var nulls: [String] = []
            for try await id in try await client.query("SELECT transaction_id FROM app_store.transactions WHERE environment IS NULL ORDER BY 1", logger: logger).decode(String.self) {
                nulls.append(id)
            }
            #expect(nulls == ["3001", "3002", "3003"], "the failed migration changed nothing")

            try await client.query("UPDATE app_store.transactions SET environment = 'Sandbox' WHERE transaction_id = '3003'", logger: logger)
            _ = try await Migrator().migrate(client, logger: logger)
            var filled: [String] = []
            let rows = try await client.query(
                """
                SELECT 't ' || transaction_id || ' ' || environment FROM app_store.transactions
                UNION ALL SELECT 's ' || original_transaction_id || ' ' || environment FROM app_store.subscriptions ORDER BY 1
                """,
                logger: logger
            )
            for try await line in rows.decode(String.self) { filled.append(line) }
            #expect(filled == ["s 3000 Production", "t 3001 Production", "t 3002 Sandbox", "t 3003 Sandbox"])
            // The same IDs in the other environment are rows of their own. (Since migration 0020 every
            // row names its app; these payloads name none, so 0020 gave them '', as here.)
            try await client.query(
                """
                INSERT INTO app_store.transactions (transaction_id, original_transaction_id, signed_date, environment, signed_transaction, bundle_id)
                VALUES ('3001', '3000', now(), 'Sandbox', 'x.y.z', '')
                """,
                logger: logger
            )
            try await client.query("INSERT INTO app_store.subscriptions (original_transaction_id, last_signed_date, environment, bundle_id) VALUES ('3000', now(), 'Sandbox', '')", logger: logger)
            await #expect(throws: (any Error).self) {
                try await client.query("INSERT INTO app_store.subscriptions (original_transaction_id, last_signed_date) VALUES ('3001', now())", logger: logger)
            }
        }
    }

    /// Running every file again (the README's psql loop at each deploy, or `migrate` adopting a
    /// psql-applied ledger) once the same IDs are stored in both environments leaves each
    /// environment's rows as they were: 0006's and 0011's fills match by environment.
    @Test func runningEveryFileAgainNeverCopiesOneEnvironmentsValuesOntoTheOthersRows() async throws {
        func jws(_ json: String) -> String {
            let payload = Data(json.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            return "eyJhbGciOiJFUzI1NiJ9.\(payload).c2ln"
        }
        let production = jws(#"{"transactionId":"4001","appAccountToken":"11111111-1111-4111-8111-111111111111","price":1000,"currency":"USD"}"#)
        let sandbox = jws(#"{"transactionId":"4001","appAccountToken":"22222222-2222-4222-8222-222222222222","price":2000,"currency":"EUR"}"#)
        try await TestDatabase.withFreshLedger { client, _ in
            try await client.query(
                """
                INSERT INTO app_store.transactions (transaction_id, original_transaction_id, signed_date, environment, signed_transaction,
                    app_account_token, price, currency, purchase_date, bundle_id)
                VALUES ('4001', '4000', now(), 'Production', \(production), '11111111-1111-4111-8111-111111111111', 1000, 'USD', now(), 'com.example.app'),
                       ('4001', '4000', now(), 'Sandbox', \(sandbox), '22222222-2222-4222-8222-222222222222', 2000, 'EUR', now() - interval '1 day', 'com.example.app')
                """,
                logger: logger
            )
            try await client.query(
                """
                INSERT INTO app_store.subscriptions (original_transaction_id, environment, last_signed_date, app_account_token, bundle_id)
                VALUES ('4000', 'Production', now(), '11111111-1111-4111-8111-111111111111', 'com.example.app'),
                       ('4000', 'Sandbox', now(), '22222222-2222-4222-8222-222222222222', 'com.example.app')
                """,
                logger: logger
            )
            func rows() async throws -> [String] {
                var found: [String] = []
                let query = """
                    SELECT 't ' || environment || ' ' || app_account_token || ' ' || price || ' ' || currency FROM app_store.transactions
                    UNION ALL SELECT 's ' || environment || ' ' || app_account_token FROM app_store.subscriptions ORDER BY 1
                    """
                for try await line in try await client.query(PostgresQuery(unsafeSQL: query), logger: logger).decode(String.self) { found.append(line) }
                return found
            }
            let before = try await rows()
            #expect(before.count == 4)
            // Adoption: a ledger whose record of migrations is gone gets every file run again.
            for _ in 0..<3 {
                try await client.query("DELETE FROM app_store.schema_migrations", logger: logger)
                _ = try await Migrator().migrate(client, logger: logger)
                #expect(try await rows() == before)
            }
        }
    }

    /// A migration that must wait for a table another session holds gives up after the lock
    /// timeout instead of queueing every writer behind it: a temporary failure (exit 75),
    /// nothing applied; once the table is free, `migrate` applies it.
    @Test func aMigrationWaitingForATableLockGivesUpAfterTheLockTimeoutAndChangesNothing() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 13 }).migrate(client, logger: logger)
            let locked = AsyncStream.makeStream(of: Void.self)
            let release = AsyncStream.makeStream(of: Void.self)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await client.withTransaction(logger: logger) { connection in
                        try await connection.query("LOCK TABLE app_store.transactions IN ACCESS SHARE MODE", logger: logger)
                        locked.continuation.yield()
                        for await _ in release.stream { break }
                    }
                }
                for await _ in locked.stream { break }
                let failure = await #expect(throws: (any Error).self) {
                    _ = try await Migrator(lockTimeout: .seconds(1)).migrate(client, logger: logger)
                }
                #expect(failure.flatMap { LedgerFailure($0) }?.kind == .temporary, "\(String(describing: failure))")
                #expect(try await Self.appliedCount(client) == 13)
                release.continuation.yield()
                try await group.waitForAll()
            }
            _ = try await Migrator(lockTimeout: .seconds(1)).migrate(client, logger: logger)
            #expect(try await Self.appliedCount(client) == Migration.bundled.count)
        }
    }

    @Test func secondMigrateAppliesNothingAndLeavesTheSchemaAsItWas() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator().migrate(client, logger: logger)
            let before = try await Self.schemaShape(client)
            let again = try await Migrator().migrate(client, logger: logger)
            #expect(again.applied.isEmpty)
            #expect(again.alreadyApplied == Migration.bundled.count)
            #expect(try await Self.schemaShape(client) == before)
            #expect(try await Self.appliedCount(client) == Migration.bundled.count)
        }
    }

    @Test func anAppliedMigrationThatWasEditedIsRefusedWithAMessage() async throws {
        try await TestDatabase.withFreshLedger(migrated: true) { client, _ in
            var edited = Migration.bundled
            edited[0].text += "\n-- an innocent-looking edit\n"
            await #expect(throws: MigrationRefused.self) {
                try await Migrator(migrations: edited).migrate(client, logger: logger)
            }
            do {
                _ = try await Migrator(migrations: edited).migrate(client, logger: logger)
            } catch let refusal as MigrationRefused {
                #expect(refusal.reason.contains("0001_ledger.sql was edited after it was applied"))
            }
        }
    }

    @Test func aDatabaseMigratedByANewerBuildIsRefused() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            let newer = Migration.bundled + [Migration(version: 9999, name: "9999_future.sql", text: "SELECT 1;")]
            _ = try await Migrator(migrations: newer).migrate(client, logger: logger)
            await #expect(throws: MigrationRefused.self) {
                try await Migrator().migrate(client, logger: logger)
            }
        }
    }

    @Test func concurrentMigrationsTakeTurnsAndApplyEachFileOnce() async throws {
        let url = try await TestDatabase.freshDatabase()
        let outcomes = try await withThrowingTaskGroup(of: Migrator.Outcome.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    // Separate clients: separate sessions racing for the advisory lock.
                    try await LedgerDatabase.withClient(url, logger: logger) { client in
                        try await Migrator().migrate(client, logger: logger)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.count == 4)
        #expect(outcomes.filter { !$0.applied.isEmpty }.count == 1, "exactly one run applies the files")
        #expect(outcomes.filter { $0.applied.isEmpty }.allSatisfy { $0.alreadyApplied == Migration.bundled.count })
        let applied = try await LedgerDatabase.withClient(url, logger: logger) { client in
            try await Self.appliedCount(client)
        }
        #expect(applied == Migration.bundled.count)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/psql")))
    func migrationFilesApplyWithPlainPsqlAndMigrateThenAdoptsThem() async throws {
        let url = try await TestDatabase.freshDatabase()
        let sqlDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("sql")
        let files = try FileManager.default.contentsOfDirectory(atPath: sqlDirectory.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files == Migration.bundled.map(\.name), "the binary embeds exactly the files in sql/")
        for file in files {
            var arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-f", sqlDirectory.appendingPathComponent(file).path]
            arguments += ["-U", url.user, "-d", url.database, "-h", url.socketDirectory ?? url.host, "-p", String(url.port)]
            var environment = ProcessInfo.processInfo.environment
            if let password = url.password { environment["PGPASSWORD"] = password }
            let result = try ChildProcess.run("/usr/bin/psql", arguments, environment: environment)
            #expect(result.status == 0, "psql -f \(file): \(result.standardError)")
        }
        try await LedgerDatabase.withClient(url, logger: logger) { client in
            #expect(try await Self.schemaShape(client).contains("notification_rows.notification_uuid uuid NO"))
            let outcome = try await Migrator().migrate(client, logger: logger)
            #expect(outcome.applied == Migration.bundled.map(\.name), "idempotent files are recorded on top of psql's work")
        }
    }

    /// Migration 0020 keys every row by its app: a ledger written before it takes each row's
    /// bundle ID from its stored JWS (a notification's data, a transaction's payload), then from
    /// related rows (subscriptions, accounts and members, consumption requests, the feed), and
    /// its runs and checkpoints from the ledger's one app; the same IDs may then be stored once
    /// per app.
    @Test func migration0020FillsEachRowsAppFromItsPayloadsAndKeysByIt() async throws {
        func jws(_ json: String) -> String {
            let payload = Data(json.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            return "eyJhbGciOiJFUzI1NiJ9.\(payload).c2ln"
        }
        let notification = jws(#"{"notificationType":"DID_RENEW","data":{"bundleId":"com.example.one","environment":"Sandbox"}}"#)
        let transaction = jws(#"{"transactionId":"5001","bundleId":"com.example.one","environment":"Sandbox"}"#)
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version <= 19 }).migrate(client, logger: logger)
            for statement in [
                """
                INSERT INTO app_store.notifications (notification_uuid, notification_type, signed_date, environment,
                    original_transaction_id, transaction_id, signed_payload, source)
                VALUES ('6a0c8f1e-0000-4000-8000-000000000020', 'DID_RENEW', now(), 'Sandbox', '5000', '5001', '\(notification)', 'webhook')
                """,
                "INSERT INTO app_store.transactions (transaction_id, original_transaction_id, signed_date, environment, signed_transaction) VALUES ('5001', '5000', now(), 'Sandbox', '\(transaction)')",
                "INSERT INTO app_store.subscriptions (original_transaction_id, environment, last_signed_date) VALUES ('5000', 'Sandbox', now())",
                "INSERT INTO app_store.accounts (environment, account_id) VALUES ('Sandbox', '5000')",
                "INSERT INTO app_store.account_members (environment, original_transaction_id, account_id) VALUES ('Sandbox', '5000', '5000')",
                "INSERT INTO app_store.runs (run_id, kind, environment, outcome) VALUES ('6a0c8f1e-0000-4000-8000-0000000000aa', 'nightly', 'Sandbox', 'succeeded')",
                """
                INSERT INTO app_store.run_checkpoints (environment, window_start, window_end, only_failures, shard, query, position, completed)
                VALUES ('Sandbox', now() - interval '1 day', now(), false, '0/1', 'pass-1', 0, true)
                """,
            ] {
                try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            _ = try await Migrator().migrate(client, logger: logger)
            var apps: [String] = []
            let query = """
                SELECT 'notifications ' || bundle_id FROM app_store.notifications
                UNION ALL SELECT 'transactions ' || bundle_id FROM app_store.transactions
                UNION ALL SELECT 'subscriptions ' || bundle_id FROM app_store.subscriptions
                UNION ALL SELECT 'accounts ' || bundle_id FROM app_store.accounts
                UNION ALL SELECT 'account_members ' || bundle_id FROM app_store.account_members
                UNION ALL SELECT 'runs ' || bundle_id FROM app_store.runs
                UNION ALL SELECT 'run_checkpoints ' || bundle_id FROM app_store.run_checkpoints ORDER BY 1
                """
            for try await line in try await client.query(PostgresQuery(unsafeSQL: query), logger: logger).decode(String.self) { apps.append(line) }
            #expect(apps == ["account_members", "accounts", "notifications", "run_checkpoints", "runs", "subscriptions", "transactions"].map { $0 + " com.example.one" })
            // Another app's rows of the same IDs are rows of their own; a row without an app is refused.
            try await client.query(
                "INSERT INTO app_store.transactions (transaction_id, original_transaction_id, signed_date, environment, signed_transaction, bundle_id) VALUES ('5001', '5000', now(), 'Sandbox', 'x.y.z', 'com.example.two')",
                logger: logger
            )
            try await client.query(
                "INSERT INTO app_store.subscriptions (original_transaction_id, environment, last_signed_date, bundle_id) VALUES ('5000', 'Sandbox', now(), 'com.example.two')",
                logger: logger
            )
            await #expect(throws: (any Error).self) {
                try await client.query("INSERT INTO app_store.subscriptions (original_transaction_id, environment, last_signed_date) VALUES ('5001', 'Sandbox', now())", logger: logger)
            }
            var columns: [String] = []
            let view = "SELECT attname FROM pg_attribute WHERE attrelid = 'app_store.entitlements'::regclass AND attnum > 0 ORDER BY attnum"
            for try await name in try await client.query(PostgresQuery(unsafeSQL: view), logger: logger).decode(String.self) { columns.append(name) }
            #expect(columns.last == "bundle_id")
        }
    }
}
