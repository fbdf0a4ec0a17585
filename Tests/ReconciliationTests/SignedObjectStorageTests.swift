import AppStoreServerAPI
import AppStoreSimulator
import Decisions
import Foundation
import Ledger
import LedgerModel
import LedgerSupport
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import Testing
import TestSupport

/// How the ledger splits a JWS into objects (migration 0021), without a database.
@Suite("Signed objects, without a database")
struct SignedObjectTests {
    static let appleTransaction: String = {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("SignedDataTests/ApplePayloads/sandbox-consumable-transaction.jws")
        return (try? String(contentsOf: file, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }()

    static func byKey(_ objects: [SignedObject]) -> [[UInt8]: SignedObject] {
        Dictionary(objects.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func aTransactionAppleSignedComesBackByteForByteFromItsHeaderPayloadAndSignature() throws {
        let jws = Self.appleTransaction
        try #require(jws.count > 4_000, "Apple's payload is in Tests/SignedDataTests/ApplePayloads")
        let objects = SignedObject.objects(storing: jws)
        #expect(objects.count == 1)
        guard case .split(let header, _, let payload, let signature, let nested) = objects[0].form else {
            Issue.record("Apple's transaction was kept whole")
            return
        }
        #expect(header == String(jws.split(separator: ".")[0]))
        #expect(signature.count == 64)
        #expect(nested.isEmpty)
        #expect(payload.first == UInt8(ascii: "{"))
        #expect(SignedObject.text(of: objects[0].key, in: Self.byKey(objects)) == jws)
        #expect(objects[0].key == SignedObject.key(of: jws.utf8))
    }

    @Test func aNotificationIsItselfItsTransactionAndItsRenewalInfoUnderOneSharedHeader() throws {
        let harness = try RecoveryHarness(customers: 20)
        let notification = try #require(harness.scenario.notifications.first { $0.type == .didRenew })
        let jws = try harness.api.signNotification(notification)
        let objects = SignedObject.objects(storing: jws)
        #expect(objects.count == 3, "the notification, its transaction and its renewal info")
        var headerKeys: Set<[UInt8]> = []
        var storedBytes = 0
        for object in objects {
            guard case .split(let header, let headerKey, let payload, let signature, _) = object.form else {
                Issue.record("kept whole")
                continue
            }
            headerKeys.insert(headerKey)
            storedBytes += payload.count + signature.count
            #expect(header.count > 2_000, "the three-certificate chain is in the header")
        }
        #expect(headerKeys.count == 1, "one Apple chain: one header row")
        guard case .split(_, _, let outer, _, let nested) = objects[0].form else { return }
        #expect(nested.count == 2 && outer.filter { $0 == SignedObject.nestedMark }.count == 2)
        #expect(SignedObject.text(of: objects[0].key, in: Self.byKey(objects)) == jws)
        // Without the chain three times, and without the second base64url of the nested two.
        #expect(storedBytes * 4 < jws.utf8.count, "\(storedBytes) bytes stored beside the header for a \(jws.utf8.count)-byte JWS")
    }

    @Test func whatWouldNotComeBackByteForByteIsKeptWhole() {
        let zeroInPayload = "eyJhbGciOiJFUzI1NiJ9." + Base64URL.encode(Array("{\"a\":\"\u{0}\"}".utf8)) + ".c2ln"
        for jws in [
            "only.two", "eyJhIjoxfQ.eyJhIjoxfR.c2ln", // leftover bits set: two texts would decode alike
            "eyJhIjoxfQ.e+J.c2ln", "eyJhIjoxfQ.eyJhIjoxfQ.c2ln.extra", ".eyJhIjoxfQ.c2ln", zeroInPayload, "",
        ] {
            let objects = SignedObject.objects(storing: jws)
            #expect(objects.count == 1)
            #expect(objects.first?.form == .whole(jws), "\(jws)")
            #expect(SignedObject.text(of: SignedObject.key(of: jws.utf8), in: Self.byKey(objects)) == jws)
        }
    }

    @Test func aNestedJWSIsAQuotedRunOfThreeBase64URLPartsWhoseHeaderIsJSON() {
        func ranges(_ text: String) -> [String] {
            let bytes = Array(text.utf8)
            return SignedObject.nestedRanges(in: bytes).map { String(decoding: bytes[$0], as: UTF8.self) }
        }
        #expect(ranges(#"{"a":"eyJx.yy.zz","b":"eyJq.r.s"}"#) == ["eyJx.yy.zz", "eyJq.r.s"])
        #expect(ranges(#"{"a":"eyJx.yy","b":"eyJx.y.z.w","c":"eyJx..z","d":"eyJx.y.","e":"xeyJ.y.z","f":"eyJx.y.z"#).isEmpty)
        #expect(ranges(#"["eyJx.y.z"]"#) == ["eyJx.y.z"])
    }
}

/// The ledger's signed payloads against a real PostgreSQL: stored as objects (migration 0021),
/// read back through the readers' views byte for byte, written before and converted in batches.
@Suite("Signed objects in the ledger")
struct SignedObjectLedgerTests {
    static let logger = TestDatabase.logger

    static func texts(_ client: PostgresClient, _ sql: String) async throws -> [String: String] {
        var found: [String: String] = [:]
        for try await (key, text) in try await client.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode((String, String?).self) {
            found[key] = text ?? ""
        }
        return found
    }

    /// Every JWS the ledger holds, read as a reader reads it (`SELECT signed_payload FROM
    /// app_store.notifications`, `signed_transaction FROM app_store.transactions`): the
    /// notifications a live server received are the very texts sent, and everything (a run's
    /// recovered notifications and repaired transactions too) verifies. The SQL split of the same
    /// texts gives the same keys.
    @Test func everyJWSReadBackIsTheTextReceivedAndVerifies() async throws {
        let harness = try RecoveryHarness(customers: 60, seed: 34)
        let verifier = try harness.verifier()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                let delivered = try harness.scenario.deliveredNotifications.map { ($0.uuid.lowercased(), try harness.api.signNotification($0)) }
                try #require(delivered.count > 20)
                _ = try await NotificationIngest(verifier: verifier, store: store).ingest(signedPayloads: delivered.map(\.1))
                let window = try harness.window()
                _ = try await harness.reconciliation(store, url, client: try harness.client(baseURL))
                    .execute(.init(kind: .run, window: .fixed(start: window.start, end: window.end), mode: .apply))

                let notifications = try await Self.texts(client, "SELECT notification_uuid::text, signed_payload FROM app_store.notifications")
                for (uuid, sent) in delivered { #expect(notifications[uuid] == sent, "notification \(uuid) read back as sent") }
                #expect(notifications.count > delivered.count, "the run recovered the missed ones")
                for (uuid, text) in notifications {
                    guard case .verified(let verified) = await verifier.verifyNotification(text) else {
                        Issue.record("notification \(uuid) does not verify as read back")
                        continue
                    }
                    #expect(verified.payload.notificationUUID.lowercased() == uuid)
                }
                let transactions = try await Self.texts(client, "SELECT transaction_id, signed_transaction FROM app_store.transactions")
                #expect(transactions.count > 20)
                for (id, text) in transactions {
                    guard case .verified(let payload) = await verifier.verifyTransaction(text) else {
                        Issue.record("transaction \(id) does not verify as read back")
                        continue
                    }
                    #expect(payload.transactionId == id)
                }
                // No row keeps its JWS as text, and SQL's split of a text finds the object the tool stored.
                let textRows = try await BackendLedgerTests.count(client,
                    "SELECT (SELECT count(*) FROM app_store.notification_rows WHERE signed_payload IS NOT NULL) + (SELECT count(*) FROM app_store.transaction_rows WHERE signed_transaction IS NOT NULL)")
                #expect(textRows == 0)
                let before = try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.signed_objects")
                for (_, sent) in delivered.prefix(10) {
                    let key = try await client.query("SELECT app_store.store_jws(\(sent))", logger: Self.logger).collect().first?.decode(ByteBuffer.self)
                    #expect(key.map { Array($0.readableBytesView) } == SignedObject.key(of: sent.utf8))
                }
                #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.signed_objects") == before, "nothing stored twice")
                #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.jws_headers") == 1, "one Apple chain, one header")
            }
        }
    }

    /// A ledger written before migration 0021 (its JWS as text): `migrate` converts every row in
    /// place, and each reads back byte for byte, verifying; a second migrate has nothing to do.
    @Test func aLedgerWrittenBeforeTheMigrationReadsBackTheSameTextsAfterIt() async throws {
        let harness = try RecoveryHarness(customers: 40, seed: 35)
        let verifier = try harness.verifier()
        let before = Migration.bundled.filter { $0.version < 21 }
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: before).migrate(client, logger: Self.logger)
            var sent: [String: String] = [:]
            for notification in harness.scenario.notifications.prefix(120) {
                let jws = try harness.api.signNotification(notification)
                sent[notification.uuid.lowercased()] = jws
                try await client.query(
                    """
                    INSERT INTO app_store.notifications (notification_uuid, notification_type, signed_date, environment, signed_payload, source, bundle_id)
                    VALUES (\(notification.uuid)::uuid, 'DID_RENEW', now(), 'Sandbox', \(jws), 'webhook', 'com.example.simulated')
                    """,
                    logger: Self.logger
                )
            }
            let outcome = try await Migrator().migrate(client, logger: Self.logger)
            #expect(outcome.applied.map(\.prefix4).first == "0021" && outcome.applied.allSatisfy { $0.prefix4 >= "0021" })
            #expect(outcome.conversion.batches >= 1)
            let read = try await Self.texts(client, "SELECT notification_uuid::text, signed_payload FROM app_store.notifications")
            #expect(read == sent, "every JWS written before reads back byte for byte")
            for text in read.values.prefix(20) {
                guard case .verified = await verifier.verifyNotification(text) else {
                    Issue.record("a converted notification does not verify")
                    continue
                }
            }
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.notification_rows WHERE signed_payload IS NOT NULL") == 0)
            #expect(try await Migrator().migrate(client, logger: Self.logger).conversion.batches == 0)
        }
    }
}

/// `prune --signed-older-than`, against a real PostgreSQL.
@Suite("Pruning old signed payloads")
struct SignedPayloadPruningTests {
    static let logger = TestDatabase.logger

    /// Half the notifications made 500 days old: pruning at 400 days drops exactly their JWS (they
    /// read NULL, keep their decoded columns, and keep as key the SHA-256 of the text sent), while
    /// every newer notification and every transaction still reads back byte for byte and
    /// verifies; a second prune drops nothing.
    @Test func pruneDropsOnlyTheOldJWSAndKeepsTheirRowsAndDigests() async throws {
        let harness = try RecoveryHarness(customers: 40, seed: 36)
        let verifier = try harness.verifier()
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: harness.logger)
            let sent = try harness.scenario.deliveredNotifications.map { ($0.uuid.lowercased(), try harness.api.signNotification($0)) }
            try #require(sent.count > 20)
            _ = try await NotificationIngest(verifier: verifier, store: store).ingest(signedPayloads: sent.map(\.1))
            let old = Set(sent.map(\.0).sorted().prefix(sent.count / 2))
            try await client.query(
                "UPDATE app_store.notification_rows SET signed_date = signed_date - interval '500 days' WHERE notification_uuid = ANY(\(old.map { UUID(uuidString: $0)! }))",
                logger: Self.logger)
            let decoded = """
                SELECT notification_uuid::text, md5(row(notification_type, subtype, signed_date, environment, original_transaction_id,
                    transaction_id, source, recorded_at, bundle_id)::text) FROM app_store.notifications
                """
            let rowsBefore = try await SignedObjectLedgerTests.texts(client, decoded)
            let objectsBefore = try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.signed_objects")
            let pruning = SignedPayloadPruning(signedBefore: Date().addingTimeInterval(-400 * 86_400), batch: 7)
            #expect(try await pruning.pending(client, logger: Self.logger) == old.count)

            let outcome = try await pruning.run(client, logger: Self.logger)
            #expect(outcome.pruned == old.count)
            #expect(outcome.batches >= old.count / 7, "in batches of 7")
            let read = try await SignedObjectLedgerTests.texts(client, "SELECT notification_uuid::text, signed_payload FROM app_store.notifications")
            for (uuid, text) in sent {
                #expect(read[uuid] == (old.contains(uuid) ? "" : text), "\(uuid): \(old.contains(uuid) ? "dropped" : "kept byte for byte")")
            }
            let keys = try await SignedObjectLedgerTests.texts(client,
                "SELECT notification_uuid::text, encode(signed_payload_key, 'hex') FROM app_store.notification_rows WHERE signed_payload_pruned_at IS NOT NULL")
            #expect(Set(keys.keys) == old)
            for (uuid, text) in sent where old.contains(uuid) {
                #expect(keys[uuid] == SignedObject.key(of: text.utf8).map { String(format: "%02x", $0) }.joined(), "the digest of what Apple sent")
            }
            #expect(try await SignedObjectLedgerTests.texts(client, decoded) == rowsBefore, "every row's decoded columns unchanged")
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.signed_objects") < objectsBefore)
            let transactions = try await SignedObjectLedgerTests.texts(client, "SELECT transaction_id, signed_transaction FROM app_store.transactions")
            #expect(!transactions.isEmpty)
            for (id, text) in transactions {
                guard case .verified = await verifier.verifyTransaction(text) else {
                    Issue.record("transaction \(id) lost its JWS")
                    continue
                }
            }
            #expect(try await pruning.run(client, logger: Self.logger).pruned == 0)
            #expect(try await pruning.pending(client, logger: Self.logger) == 0)
        }
    }
}

/// The conversion of a large ledger written before 0021, measured with a writer beside it.
@Suite("Signed objects: converting a large ledger")
struct SignedObjectConversionTests {
    static let logger = TestDatabase.logger

    /// 100,000 notifications stored as text (each with a nested transaction JWS, about 1.9 KB),
    /// converted by `migrate` while another connection keeps updating random rows and inserting
    /// new ones, each statement with `lock_timeout` at 1 s: none times out (no lock on
    /// `notifications` or one of its rows is held a second or more), the conversion runs in many
    /// batches, the longest under a second, and every row reads back the text it had.
    @Test func aLedgerOf100000NotificationsIsConvertedInBatchesAndNoWriterWaitsASecond() async throws {
        try await TestDatabase.withFreshLedger(migrated: false) { client, _ in
            _ = try await Migrator(migrations: Migration.bundled.filter { $0.version < 21 }).migrate(client, logger: Self.logger)
            try await client.query(
                """
                WITH s AS (
                    SELECT i, gen_random_uuid() AS u,
                        translate(encode(convert_to('{"alg":"ES256","x5c":["' || repeat('MIIB', 100) || '"]}', 'UTF8'), 'base64'), E'+/=\n', '-_') AS h
                    FROM generate_series(1, 100000) i
                ), p AS (
                    SELECT i, u, h, h || '.' || translate(encode(convert_to('{"transactionId":"t' || i || '","originalTransactionId":"o' || i
                        || '","productId":"monthly"}', 'UTF8'), 'base64'), E'+/=\n', '-_') || '.'
                        || translate(encode(decode(md5(u::text) || md5(i::text), 'hex'), 'base64'), E'+/=\n', '-_') AS tx
                    FROM s
                )
                INSERT INTO app_store.notifications (notification_uuid, notification_type, signed_date, environment, original_transaction_id,
                    transaction_id, signed_payload, source, bundle_id)
                SELECT u, 'DID_RENEW', now() - i * interval '1 minute', 'Production', 'o' || i, 't' || i,
                    h || '.' || translate(encode(convert_to('{"notificationType":"DID_RENEW","notificationUUID":"' || u
                        || '","data":{"bundleId":"com.example.app","signedTransactionInfo":"' || tx || '"}}', 'UTF8'), 'base64'), E'+/=\n', '-_')
                        || '.' || translate(encode(decode(md5(i::text) || md5(u::text), 'hex'), 'base64'), E'+/=\n', '-_'),
                    'history', 'com.example.app'
                FROM p
                """,
                logger: Self.logger
            )
            try await client.query(
                "CREATE TABLE public.before AS SELECT notification_uuid, md5(signed_payload) AS digest FROM app_store.notifications",
                logger: Self.logger)
            var keys: [UUID] = []
            for try await key in try await client.query("SELECT notification_uuid FROM public.before TABLESAMPLE BERNOULLI (1)", logger: Self.logger)
                .decode(UUID.self) { keys.append(key) }
            let sample = keys

            struct Probe: Sendable { var statements = 0, timedOut = 0, timedOutBehindTheChangeOfShape = 0, failed: [String] = [] }
            let (outcome, probe) = try await withThrowingTaskGroup(of: Probe?.self) { group in
                group.addTask {
                    try await client.withConnection { connection in
                        try await connection.query("SELECT set_config('lock_timeout', '1s', false)", logger: Self.logger)
                        var probe = Probe()
                        var index = 0
                        while !Task.isCancelled {
                            let key = sample[index % sample.count]
                            index += 1
                            do {
                                try await connection.query(
                                    "UPDATE app_store.notifications SET recorded_at = recorded_at WHERE notification_uuid = \(key)", logger: Self.logger)
                                if index % 10 == 0 {
                                    try await connection.query(
                                        """
                                        INSERT INTO app_store.notifications (notification_uuid, notification_type, signed_date, environment, signed_payload, source, bundle_id)
                                        VALUES (gen_random_uuid(), 'TEST', now(), 'Production', 'x.y.z', 'webhook', 'com.example.app')
                                        """, logger: Self.logger)
                                }
                                probe.statements += 1
                                // A writer, not a flood: the suite's other tests share the two cores.
                                try await Task.sleep(for: .milliseconds(10))
                            } catch is CancellationError {
                                break
                            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
                                // PostgreSQL names the row a statement waited for ("while updating
                                // tuple (…) in relation …", "while inserting index tuple …"): a wait
                                // for a row is a wait for a batch's transaction; a wait for the
                                // table itself (no tuple named) is a wait for the change of shape,
                                // the one thing that locks the table rather than rows.
                                let context = error.serverInfo?[.locationContext] ?? ""
                                if context.contains("tuple") { probe.timedOut += 1 } else { probe.timedOutBehindTheChangeOfShape += 1 }
                            } catch {
                                probe.failed.append(String(reflecting: error).prefix(300).description)
                            }
                        }
                        try await connection.query("SELECT set_config('lock_timeout', '0', false)", logger: Self.logger)
                        return probe
                    }
                }
                try await Task.sleep(for: .milliseconds(300))
                let outcome = try await Migrator().migrate(client, logger: Self.logger)
                try await Task.sleep(for: .milliseconds(300))
                group.cancelAll()
                var probe = Probe()
                for try await result in group { if let result { probe = result } }
                return (outcome, probe)
            }
            #expect(outcome.applied.map { String($0.prefix(4)) }.first == "0021")
            #expect(outcome.conversion.batches >= 20, "\(outcome.conversion.batches) batches")
            #expect(outcome.conversion.longestBatch < .seconds(1), "longest batch in the server \(outcome.conversion.longestBatch)")
            #expect(probe.statements > 20, "the writer beside it ran")
            #expect(probe.timedOut == 0, "\(probe.timedOut) statements waited a second for a lock held by the conversion")
            // The change of shape holds its lock for one statement and a commit: well under a second
            // on an idle machine; under the whole suite on two cores it has once taken longer. Shown, and bounded below.
            if probe.timedOutBehindTheChangeOfShape > 0 {
                print("note: \(probe.timedOutBehindTheChangeOfShape) writer statement(s) waited over 1 s behind 0021's change of shape")
            }
            // One statement and its commit: the writer can time out behind it once, or twice if it
            // held the table over two seconds (one wait has been seen under the whole suite). More is a lock
            // held for longer than the change of shape should ever take.
            #expect(probe.timedOutBehindTheChangeOfShape <= 2, "the table was locked over 2 s: \(probe.timedOutBehindTheChangeOfShape) waits")
            #expect(probe.failed.isEmpty, "\(probe.failed.prefix(3))")
            let converted = try await BackendLedgerTests.count(client,
                "SELECT count(*) FROM app_store.notification_rows n JOIN public.before b USING (notification_uuid) WHERE n.signed_payload IS NULL")
            #expect(converted == 100_000)
            let differing = try await BackendLedgerTests.count(client,
                "SELECT count(*) FROM app_store.notifications n JOIN public.before b USING (notification_uuid) WHERE md5(n.signed_payload) IS DISTINCT FROM b.digest")
            #expect(differing == 0, "every row reads back the text it had")
        }
    }
}

extension String {
    fileprivate var prefix4: String { String(prefix(4)) }
}
