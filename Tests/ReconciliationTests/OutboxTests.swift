import AppStoreSimulator
import Decisions
import Foundation
import Ledger
import LedgerSupport
import LifecycleEvents
import NIOCore
import PostgresNIO
import Reconciliation
import TestSupport
import Testing
import ThrowawayPostgres

/// The outbox (migration 0033, issue 66) read as Debezium and Sequin read it: through a logical
/// replication slot with PostgreSQL's own pgoutput plugin and the publication `migrate` made.
@Suite("The outbox through PostgreSQL's logical decoding")
struct OutboxTests {
    /// One message of pgoutput's protocol (version 1) that the tests look at.
    enum Message: Equatable {
        case begin(xid: UInt32)
        case relation(id: UInt32, namespace: String, name: String, columns: [String])
        case insert(relation: UInt32, values: [String?])
        case commit(lsn: UInt64)
        case other(UInt8)
    }

    /// A pgoutput message's bytes, read in order.
    struct Reader {
        struct Short: Error {}
        var buffer: ByteBuffer

        mutating func integer<Value: FixedWidthInteger>(_ type: Value.Type = Value.self) throws -> Value {
            guard let value = buffer.readInteger(as: Value.self) else { throw Short() }
            return value
        }

        mutating func string() throws -> String {
            let view = buffer.readableBytesView
            guard let end = view.firstIndex(of: 0), let text = buffer.readString(length: end - view.startIndex) else { throw Short() }
            buffer.moveReaderIndex(forwardBy: 1)
            return text
        }

        mutating func text(_ length: Int) throws -> String {
            guard let text = buffer.readString(length: length) else { throw Short() }
            return text
        }
    }

    /// Reads one message (PostgreSQL's "Logical Replication Message Formats").
    static func parse(_ bytes: [UInt8]) throws -> Message {
        var reader = Reader(buffer: ByteBuffer(bytes: bytes))
        let tag: UInt8 = try reader.integer()
        switch tag {
        case UInt8(ascii: "B"):
            _ = try reader.integer(UInt64.self)
            _ = try reader.integer(Int64.self)
            return .begin(xid: try reader.integer())
        case UInt8(ascii: "R"):
            let id: UInt32 = try reader.integer()
            let namespace = try reader.string(), name = try reader.string()
            _ = try reader.integer(UInt8.self)
            let count: Int16 = try reader.integer()
            var columns: [String] = []
            for _ in 0..<count {
                _ = try reader.integer(UInt8.self)
                columns.append(try reader.string())
                _ = try reader.integer(UInt32.self)
                _ = try reader.integer(Int32.self)
            }
            return .relation(id: id, namespace: namespace, name: name, columns: columns)
        case UInt8(ascii: "I"):
            let relation: UInt32 = try reader.integer()
            #expect(try reader.integer(UInt8.self) == UInt8(ascii: "N"), "a new tuple")
            let count: Int16 = try reader.integer()
            var values: [String?] = []
            for _ in 0..<count {
                switch try reader.integer(UInt8.self) {
                case UInt8(ascii: "t"): values.append(try reader.text(Int(try reader.integer(Int32.self))))
                default: values.append(nil)
                }
            }
            return .insert(relation: relation, values: values)
        case UInt8(ascii: "C"):
            _ = try reader.integer(UInt8.self)
            return .commit(lsn: try reader.integer())
        default:
            return .other(tag)
        }
    }

    /// What the slot gives since it was last read: each row inserted into a published table, with
    /// its transaction's xid and commit LSN, in the stream's order.
    struct Streamed {
        var xid: UInt32
        var commit: UInt64 = 0
        var table: String
        var row: [String: String?]
    }

    static func read(_ slot: String, _ client: PostgresClient) async throws -> [Streamed] {
        let rows = try await client.query(
            """
            SELECT data FROM pg_logical_slot_get_binary_changes(\(slot), NULL, NULL,
                'proto_version', '1', 'publication_names', \(OutboxPublication.name))
            """,
            logger: TestDatabase.logger
        )
        var relations: [UInt32: (String, [String])] = [:]
        var streamed: [Streamed] = []
        var open: (xid: UInt32, from: Int)?
        for try await data in rows.decode(ByteBuffer.self) {
            switch try parse(Array(data.readableBytesView)) {
            case .begin(let xid):
                #expect(open == nil, "a transaction begins after the last one committed")
                open = (xid, streamed.count)
            case .relation(let id, let namespace, let name, let columns): relations[id] = ("\(namespace).\(name)", columns)
            case .insert(let relation, let values):
                let (table, columns) = try #require(relations[relation])
                streamed.append(Streamed(xid: try #require(open).xid, table: table, row: Dictionary(uniqueKeysWithValues: zip(columns, values))))
            case .commit(let lsn):
                let begun = try #require(open)
                for index in begun.from..<streamed.count { streamed[index].commit = lsn }
                open = nil
            case .other(let tag):
                // Only inserts are published (publish = 'insert'): no update, delete or truncate.
                #expect(![UInt8(ascii: "U"), UInt8(ascii: "D"), UInt8(ascii: "T")].contains(tag))
            }
        }
        return streamed
    }

    static func withSlot(_ client: PostgresClient, _ body: (String) async throws -> Void) async throws {
        let level = try await client.query("SELECT current_setting('wal_level')", logger: TestDatabase.logger).collect().first?.decode(String.self)
        try #require(level == "logical", "the suite's cluster runs with wal_level=logical")
        // What `migrate` does after the migrations.
        #expect(try await OutboxPublication.ensure(client, logger: TestDatabase.logger) == .created)
        #expect(try await OutboxPublication.ensure(client, logger: TestDatabase.logger) == .existed)
        let slot = "outbox_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        _ = try await client.query("SELECT pg_create_logical_replication_slot(\(slot), 'pgoutput')", logger: TestDatabase.logger).collect()
        do {
            try await body(slot)
        } catch {
            _ = try? await client.query("SELECT pg_drop_replication_slot(\(slot))", logger: TestDatabase.logger).collect()
            throw error
        }
        _ = try await client.query("SELECT pg_drop_replication_slot(\(slot))", logger: TestDatabase.logger).collect()
    }

    /// The outbox's rows, by id: (type, aggregateid, payload).
    static func outbox(_ client: PostgresClient) async throws -> [String: (type: String, aggregate: String, payload: String)] {
        var found: [String: (type: String, aggregate: String, payload: String)] = [:]
        let rows = try await client.query("SELECT id::text, type, aggregateid, payload::text FROM app_store.outbox", logger: TestDatabase.logger)
        for try await (id, type, aggregate, payload) in rows.decode((String, String, String, String).self) { found[id] = (type, aggregate, payload) }
        return found
    }

    /// Live notifications from four writers at once, then a recovery of an outage (its passes 1
    /// and 2): every outbox row reaches the slot once, as an insert, transaction by transaction in
    /// commit order, with the columns Debezium's router reads; a rolled-back write leaves nothing.
    @Test func everyOutboxRowOfLiveWritersAndARecoveryStreamsOnceAsAnInsertInCommitOrder() async throws {
        let harness = try RecoveryHarness(customers: 80, seed: 660)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                try await Self.withSlot(client) { slot in
                    let store = LedgerStore(client: client, logger: harness.logger)
                    // A burst of live writers: the delivered notifications, a share of the customers each.
                    let delivered = harness.scenario.deliveredNotifications
                    let verifier = try harness.verifier()
                    let signed = try delivered.map { try harness.api.signNotification($0) }
                    let shares = (0..<4).map { share in zip(delivered, signed).filter { abs($0.0.originalTransactionId.hashValue) % 4 == share }.map(\.1) }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for share in shares {
                            group.addTask {
                                let ingest = NotificationIngest(verifier: verifier, store: store)
                                for start in stride(from: 0, to: share.count, by: 25) {
                                    _ = try await ingest.ingest(signedPayloads: Array(share[start..<min(start + 25, share.count)]))
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    let window = try harness.window()
                    _ = try await harness.reconciliation(store, url, client: try harness.client(baseURL))
                        .execute(.init(kind: .run, window: .fixed(start: window.start, end: window.end), mode: .apply))
                    // A write rolled back: its row never reaches the stream.
                    let rolledBack = UUID()
                    struct RolledBack: Error {}
                    let failure = await #expect(throws: PostgresTransactionError.self) {
                        try await client.withTransaction(logger: harness.logger) { connection in
                            try await connection.query(
                                """
                                INSERT INTO app_store.outbox (id, aggregatetype, aggregateid, type, payload) VALUES (\(rolledBack), 'subscription', '1', 'renewed', '{}')
                                """,
                                logger: harness.logger
                            )
                            throw RolledBack()
                        }
                    }
                    #expect(failure?.closureError is RolledBack && failure?.rollbackError == nil)

                    let streamed = try await Self.read(slot, client)
                    let outbox = try await Self.outbox(client)
                    #expect(outbox.count > 100, "the world's changes gave events: \(outbox.count)")
                    #expect(streamed.allSatisfy { $0.table == "app_store.outbox" }, "the publication holds the outbox alone")
                    let ids = streamed.compactMap { $0.row["id"] ?? nil }
                    #expect(ids.count == Set(ids).count, "each row once")
                    #expect(Set(ids) == Set(outbox.keys), "every row, and only committed ones")
                    #expect(!ids.contains(rolledBack.uuidString.lowercased()))
                    #expect(Set(streamed.first?.row.keys.map { $0 } ?? []) == ["id", "aggregatetype", "aggregateid", "type", "payload", "created_at", "bundle_id", "environment"])
                    // Transaction by transaction, in commit order.
                    #expect(zip(streamed, streamed.dropFirst()).allSatisfy { $0.commit <= $1.commit && ($0.commit != $1.commit || $0.xid == $1.xid) })
                    #expect(Set(streamed.map(\.xid)).count > 4, "many transactions, from several writers")
                    for row in streamed {
                        let id = try #require(row.row["id"] ?? nil)
                        let stored = try #require(outbox[id])
                        #expect(row.row["type"] == stored.type && row.row["aggregateid"] == stored.aggregate && row.row["aggregatetype"] == "subscription")
                        #expect(row.row["environment"] == "Sandbox" && row.row["bundle_id"] == harness.scenario.configuration.bundleId)
                        let payload = try #require(try JSONSerialization.jsonObject(with: Data(stored.payload.utf8)) as? [String: Any])
                        #expect(payload["type"] as? String == stored.type && payload["original_transaction_id"] as? String == stored.aggregate)
                        #expect(LifecycleEventType(rawValue: stored.type) != nil)
                    }
                    // The live path and the recovery both wrote events, each named for its cause.
                    let causes = Set(outbox.values.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.payload.utf8)) as? [String: Any])?["cause"] as? String })
                    #expect(causes.isSuperset(of: ["webhook", "recovery"]), "\(causes)")
                    let types = Set(outbox.values.map(\.type))
                    print("outbox: \(outbox.count) events in \(Set(streamed.map(\.xid)).count) transactions: \(Dictionary(grouping: outbox.values, by: \.type).mapValues(\.count).sorted { $0.key < $1.key })")
                    #expect(types.isSuperset(of: ["renewed", "expired", "subscription_started"]), "\(types)")
                }
            }
        }
    }

    /// On a server without logical decoding `migrate` still succeeds, makes no publication, and
    /// says how to enable it; on the suite's (wal_level=logical) it makes it, of inserts alone.
    @Test func migrateWithoutLogicalDecodingSucceedsAndSaysHowToEnableThePublication() async throws {
        let cluster = try ThrowawayPostgres.start(settings: ["wal_level=replica"])
        defer { cluster.stop() }
        let state = try await LedgerDatabase.withClient(try DatabaseURL(cluster.url()), logger: TestDatabase.logger) { client in
            _ = try await Migrator().migrate(client, logger: TestDatabase.logger)
            let state = try await OutboxPublication.ensure(client, logger: TestDatabase.logger)
            let published = try await client.query("SELECT count(*) FROM pg_publication", logger: TestDatabase.logger).collect().first?.decode(Int.self)
            #expect(published == 0)
            return state
        }
        #expect(state == .walLevel("replica"))
        #expect(state.message?.contains("set wal_level = logical (and restart the server), then run migrate again") == true)
        try await TestDatabase.withFreshLedger { client, _ in
            #expect(try await OutboxPublication.ensure(client, logger: TestDatabase.logger) == .created)
            let rows = try await client.query(
                """
                SELECT p.pubinsert, p.pubupdate, p.pubdelete, array_agg(t.schemaname || '.' || t.tablename)
                FROM pg_publication p JOIN pg_publication_tables t ON t.pubname = p.pubname
                WHERE p.pubname = \(OutboxPublication.name) GROUP BY 1, 2, 3
                """,
                logger: TestDatabase.logger
            )
            var found = false
            for try await (insert, update, delete, tables) in rows.decode((Bool, Bool, Bool, [String]).self) {
                found = true
                #expect(insert && !update && !delete && tables == ["app_store.outbox"])
            }
            #expect(found, "the publication of the outbox, its inserts alone")
        }
    }

    /// `prune --outbox-older-than`: old rows go, in batches; newer ones stay.
    @Test func pruningTheOutboxDeletesOnlyRowsCreatedBeforeTheTime() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            try await client.query(
                """
                INSERT INTO app_store.outbox (id, aggregatetype, aggregateid, type, payload, created_at)
                SELECT gen_random_uuid(), 'subscription', s::text, 'renewed', '{}', now() - s * interval '1 day' FROM generate_series(1, 9) s
                """,
                logger: TestDatabase.logger
            )
            let pruning = OutboxPruning(createdBefore: Date().addingTimeInterval(-4.5 * 86_400), batch: 2)
            #expect(try await pruning.pending(client, logger: TestDatabase.logger) == 5)
            #expect(try await pruning.run(client, logger: TestDatabase.logger) == 5)
            #expect(try await pruning.pending(client, logger: TestDatabase.logger) == 0)
            #expect(try await Self.outbox(client).count == 4)
        }
    }

    /// Without the publication nothing is written to the outbox; with it, a change that is no event
    /// (Apple's same values signed again) writes no row, and the same notifications give their events once.
    @Test func withoutThePublicationNothingIsWrittenAndTheSameNotificationsAgainWriteNoEvents() async throws {
        let harness = try RecoveryHarness(customers: 30, seed: 661)
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: harness.logger)
            // No publication, no events: nobody could read them.
            try await harness.seedDeliveredNotifications(store)
            #expect(try await Self.outbox(client).isEmpty)
        }
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: harness.logger)
            #expect(try await OutboxPublication.ensure(client, logger: TestDatabase.logger) == .created)
            try await harness.seedDeliveredNotifications(store)
            let first = try await Self.outbox(client).count
            #expect(first > 0)
            try await harness.seedDeliveredNotifications(store)
            #expect(try await Self.outbox(client).count == first)
        }
    }
}
