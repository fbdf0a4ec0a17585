import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

/// Several writers of one subscription at once (issue 31, point 8): `serve`'s batch writers,
/// `ingest` and a run each read the ledger, plan, and write. A notification without renewal
/// info copies those fields from the row it read, so without a lock the later writer could
/// write back what the earlier one had just changed.
@Suite("Concurrent writers of one subscription")
struct ConcurrentWritersTests {
    /// The subscription's row starts with auto-renew on (S0). A (signed at t+1 s) turns it off
    /// and carries renewal info; B (t+2 s) carries none. A's writer starts first, and both have
    /// read the row before either can write (the subscriptions table is locked for writes
    /// meanwhile). Applied in order, auto-renew is off: it must be off after both commit.
    @Test func aNotificationWithoutRenewalInfoWrittenAtTheSameTimeNeverUndoesOneWithIt() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 318)
        let (base, a, b) = try Self.renewalPair(harness)
        let (signedBase, signedA, signedB) = (try harness.api.signNotification(base), try harness.api.signNotification(a), try harness.api.signNotification(b))
        let logger = harness.logger
        let customer = base.originalTransactionId

        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: logger))
            #expect(try await ingest.ingest(signedPayload: signedBase) == .recorded(stale: false))
            #expect(try await Self.autoRenewStatus(client, customer) == 1)

            let writesHeld = AsyncStream.makeStream(of: Void.self)
            let release = AsyncStream.makeStream(of: Void.self)
            async let lock: Void = client.withTransaction(logger: logger) { connection in
                // Writes wait; reads (the writers' look at the ledger) do not.
                try await connection.query("LOCK TABLE app_store.subscriptions IN EXCLUSIVE MODE", logger: logger)
                writesHeld.continuation.yield()
                for await _ in release.stream { break }
            }
            for await _ in writesHeld.stream { break }
            async let first = ingest.ingest(signedPayload: signedA)
            try await Self.waitForLockWaiters(1, client)
            async let second = ingest.ingest(signedPayload: signedB)
            try await Self.waitForLockWaiters(2, client)
            release.continuation.yield()
            try await lock
            let outcomes = (try await first, try await second)
            #expect(outcomes.0 == .recorded(stale: false))
            #expect(outcomes.1 == .recorded(stale: false))
            #expect(try await Self.autoRenewStatus(client, customer) == 0, "B, without renewal info, wrote back the auto-renew status it had read before A")
        }
    }

    /// The same two notifications delivered the other way round, one after the other: B
    /// (t+2 s, no renewal info) first, then A (t+1 s, auto-renew off). A is older than the row,
    /// but its renewal info is newer than the row's (B had none): the row takes A's renewal
    /// fields and nothing else (`renewal_signed_date`, migration 0019). Then the base notification
    /// again, as a replay with a new UUID would be: its renewal info is older than A's, so it
    /// changes nothing.
    @Test func renewalInfoDeliveredAfterANewerNotificationWithoutItStillApplies() async throws {
        let harness = try RecoveryHarness(customers: 20, seed: 318)
        let (base, a, b) = try Self.renewalPair(harness)
        let signed = (try harness.api.signNotification(base), try harness.api.signNotification(a), try harness.api.signNotification(b))
        let logger = harness.logger
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: logger))
            _ = try await ingest.ingest(signedPayload: signed.0)
            _ = try await ingest.ingest(signedPayload: signed.2)
            let lastSignedBefore = try await Self.lastSignedDate(client, base.originalTransactionId)
            #expect(try await ingest.ingest(signedPayload: signed.1) == .recorded(stale: false))
            #expect(try await Self.autoRenewStatus(client, base.originalTransactionId) == 0)
            #expect(try await Self.lastSignedDate(client, base.originalTransactionId) == lastSignedBefore, "the row stays as of B")
            var replay = base
            replay.uuid = UUID().uuidString.lowercased()
            _ = try await ingest.ingest(signedPayload: try harness.api.signNotification(replay))
            #expect(try await Self.autoRenewStatus(client, base.originalTransactionId) == 0, "older renewal info does not undo A's")
        }
    }

    /// Customer locks are keyed by a 32-bit hash, so two customers can share one. Writer B
    /// (customers z and y) and writer A (x and z), where x and y share a hash and x < z < y as
    /// text: taken in text order, B waits for z (held here), A takes x's hash and waits for z
    /// too; once z is free, B takes it and waits for y's hash, which A holds, while A waits for
    /// z: a deadlock PostgreSQL ends by failing one. Taken by hash, each once, both commit.
    @Test func writersWhoseCustomersShareALockHashNeverWaitForEachOtherInACircle() async throws {
        let logger = TestDatabase.logger
        try await TestDatabase.withFreshLedger { client, _ in
            var pairs: [(String, String)] = []
            for try await (x, y) in try await client.query(
                """
                SELECT a.key, b.key FROM
                    (SELECT 'c' || g AS key, hashtext('com.example.simulated Sandbox:c' || g) AS hash FROM generate_series(1, 300000) AS g) AS a
                    JOIN (SELECT 'c' || g AS key, hashtext('com.example.simulated Sandbox:c' || g) AS hash FROM generate_series(1, 300000) AS g) AS b
                    ON a.hash = b.hash AND a.key < b.key
                """,
                logger: logger
            ).decode((String, String).self) {
                pairs.append((x, y))
            }
            // x < z < y as Swift orders text (what the writers once sorted by), z its own hash.
            let (x, y) = try #require(pairs.map { $0 < $1 ? ($0, $1) : ($1, $0) }.first { !$1.hasPrefix($0) })
            let z = x + "0"
            #expect(x < z && z < y)
            let store = LedgerStore(client: client, logger: logger)
            let held = AsyncStream.makeStream(of: Void.self)
            let release = AsyncStream.makeStream(of: Void.self)
            async let holder: Void = client.withTransaction(logger: logger) { connection in
                try await connection.query(
                    "SELECT pg_advisory_xact_lock(hashtext('appstore-reconcile.customer'), hashtext('com.example.simulated Sandbox:' || \(z)))", logger: logger)
                held.continuation.yield()
                for await _ in release.stream { break }
            }
            for await _ in held.stream { break }
            let write = { @Sendable (customers: [String]) async -> String? in
                do {
                    _ = try await store.applyLocked(pair: AppStorePair(bundleId: "com.example.simulated", environment: .sandbox), notifications: [], customers: customers, transactions: [], runId: nil) { _ in
                        (LedgerBatch(cause: .webhook), ())
                    }
                    return nil
                } catch {
                    return String(reflecting: error)
                }
            }
            async let b = write([z, y])
            try await Self.waitForLockWaiters(1, client)
            async let a = write([x, z])
            try await Self.waitForLockWaiters(2, client)
            release.continuation.yield()
            try await holder
            let failures = (await b, await a)
            #expect(failures.0 == nil, "B: \(failures.0 ?? "")")
            #expect(failures.1 == nil, "A: \(failures.1 ?? "")")
        }
    }

    /// A batch whose statements end after its commit deadline (serve has answered 503 for it
    /// meanwhile) is rolled back: the notification is not in the ledger, and comes again.
    @Test func aBatchPastItsCommitDeadlineIsRolledBackNotWritten() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 319)
        let notification = try #require(harness.scenario.notifications.first)
        let signed = try harness.api.signNotification(notification)
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            let input = await ingest.verify(signed)
            let error = await #expect(throws: PostgresTransactionError.self) {
                _ = try await ingest.ingest(verified: [input], commitBy: .now - .milliseconds(1))
            }
            #expect(error?.closureError is LedgerStore.CommitDeadlinePassed)
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.notifications") == 0)
            #expect(try await ingest.ingest(verified: [input], commitBy: .now + .seconds(60)) == [.recorded(stale: false)])
        }
    }

    /// A renewing subscription's notification with auto-renew on (the row's start), A one
    /// second later turning auto-renew off (with renewal info), and B two seconds later without
    /// renewal info.
    static func renewalPair(_ harness: RecoveryHarness) throws -> (base: Scenario.Notification, a: Scenario.Notification, b: Scenario.Notification) {
        let base = try #require(
            harness.scenario.notifications.last { $0.renewalInfo?.autoRenewStatus == 1 && $0.status == .active && $0.type.rawValue == "DID_RENEW" })
        var a = base
        a.uuid = UUID().uuidString.lowercased()
        a.type = NotificationType(rawValue: "DID_CHANGE_RENEWAL_STATUS")
        a.subtype = NotificationSubtype(rawValue: "AUTO_RENEW_DISABLED")
        a.signedDate = base.signedDate + 1_000
        a.renewalInfo?.autoRenewStatus = 0
        a.renewalInfo?.signedDate = a.signedDate
        var b = base
        b.uuid = UUID().uuidString.lowercased()
        b.type = NotificationType(rawValue: "REFUND_DECLINED")
        b.subtype = nil
        b.signedDate = base.signedDate + 2_000
        b.renewalInfo = nil
        return (base, a, b)
    }

    static func autoRenewStatus(_ client: PostgresClient, _ customer: String) async throws -> Int? {
        for try await value in try await client.query(
            "SELECT auto_renew_status FROM app_store.subscriptions WHERE original_transaction_id = \(customer)", logger: TestDatabase.logger
        ).decode(Int?.self) {
            return value
        }
        return nil
    }

    static func lastSignedDate(_ client: PostgresClient, _ customer: String) async throws -> Date? {
        for try await value in try await client.query(
            "SELECT last_signed_date FROM app_store.subscriptions WHERE original_transaction_id = \(customer)", logger: TestDatabase.logger
        ).decode(Date?.self) {
            return value
        }
        return nil
    }

    /// Waits until `count` sessions wait for a lock (a table's or a customer's).
    static func waitForLockWaiters(_ count: Int, _ client: PostgresClient) async throws {
        for _ in 0..<400 {
            var waiting = 0
            for try await value in try await client.query(
                "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()", logger: TestDatabase.logger
            ).decode(Int.self) {
                waiting = value
            }
            if waiting >= count { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        Issue.record("\(count) sessions never waited for a lock")
    }
}
