import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import TestSupport
import Testing
import ThrowawayPostgres

@Suite("changes on the command line")
struct ChangesCommandTests {
    static func body(_ harness: RecoveryHarness, _ notification: Scenario.Notification) throws -> String {
        "{\"signedPayload\":\"\(try harness.api.signNotification(notification))\"}"
    }

    static func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func changesPrintsTheFeedAsJSONLinesAndFollowPrintsAnotherProcesssCommit() async throws {
        let harness = try RecoveryHarness(customers: 6, seed: 38)
        let notifications = harness.scenario.notifications
        let first = try #require(notifications.first)
        let second = try #require(notifications.first { $0.customer != first.customer })
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            let ingested = try await BuiltBinary.run(["ingest"], environment: environment, standardInput: try Self.body(harness, first))
            #expect(ingested.exitCode == 0, "\(ingested.combined)")

            // The whole feed: one JSON object per line, in id order.
            let all = try await BuiltBinary.run(["changes"], environment: ["DATABASE_URL": environment["DATABASE_URL"]!])
            #expect(all.exitCode == 0, "\(all.combined)")
            let lines = all.standardOutput.split(separator: "\n").map(String.init)
            var stored = 0
            for try await count in try await client.query("SELECT count(*) FROM app_store.changes").decode(Int.self) { stored = count }
            #expect(stored >= 2 && lines.count == stored, "a transaction and a subscription at least")
            let objects = try lines.map(Self.object)
            let ids = objects.compactMap { $0["id"] as? Int }
            #expect(ids == ids.sorted() && Set(ids).count == ids.count)
            for object in objects {
                #expect(object["cause"] as? String == "webhook")
                #expect(object["notification_uuid"] as? String == first.uuid.lowercased())
                #expect(object["before"] is NSNull, "the first notification of a customer creates its rows")
                #expect((object["after"] as? [String: Any])?["original_transaction_id"] as? String == object["original_transaction_id"] as? String)
            }
            #expect(Set(objects.compactMap { $0["kind"] as? String }) == ["subscription", "transaction"])
            let limited = try await BuiltBinary.run(["changes", "--after", "0", "--limit", "1"], environment: environment)
            #expect(limited.standardOutput.split(separator: "\n").count == 1)
            let last = try #require(ids.last)
            #expect(try await BuiltBinary.run(["changes", "--after", String(last)], environment: environment).standardOutput.isEmpty)
            #expect(try await BuiltBinary.run(["changes", "--after", "-1"], environment: environment).exitCode == 64)

            // --follow: started after the last change but one, it prints that one (so it is listening), then waits.
            let output = scratch.appendingPathComponent("follow.jsonl").path
            let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(descriptor >= 0)
            let follower = try ChildProcess.spawn(
                BuiltBinary.path, ["changes", "--after", String(last - 1), "--follow"], environment: BuiltBinary.environment(environment),
                standardOutput: descriptor
            )
            close(descriptor)
            let follow = FollowerOutput(path: output)
            #expect(await follow.waitFor(1, seconds: 20) != nil, "the follower printed the change after --after")

            // A commit by another appstore-reconcile process (ingest) reaches it too.
            let other = try await BuiltBinary.run(["ingest"], environment: environment, standardInput: try Self.body(harness, second))
            #expect(other.exitCode == 0, "\(other.combined)")
            #expect(await follow.waitFor(2, seconds: 10) != nil)
            #expect(follow.lines.dropFirst(1).contains { (try? Self.object($0))?["notification_uuid"] as? String == second.uuid.lowercased() })

            follower.send(SIGTERM)
            #expect(await follower.waitAsync() == 0, "SIGTERM ends following with exit 0")
            #expect(follow.lines.count >= 2)
        }
    }
}

extension ChangesCommandTests {
    /// One change: a subscription row of its own, written through the tool's write path.
    static func writeChange(_ store: LedgerStore, _ index: Int) async throws {
        var batch = LedgerBatch(cause: .webhook)
        var row = SubscriptionRecord(
            originalTransactionId: "91000000000\(10_000 + index)", productId: "com.example.followed", status: 1, expiresDate: nil, autoRenewStatus: 1,
            autoRenewProductId: nil, isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date()
        )
        row.environment = "Sandbox"
        row.bundleId = "com.example.simulated"
        batch.subscriptions = [row]
        _ = try await store.apply(batch, runId: nil)
    }

    /// Ends the follower's database connection from the server's side, as a restart or a
    /// failover would; how many were ended.
    static func terminateFollower(_ client: PostgresClient) async throws -> Int {
        var ended = 0
        for try await value in try await client.query(
            """
            SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
            WHERE pid <> pg_backend_pid() AND datname = current_database()
              AND (query LIKE 'LISTEN%app_store_changes%' OR query LIKE '%FROM app_store.changes WHERE id >%')
            """
        ).decode(Int.self) {
            ended = value
        }
        return ended
    }

    /// `changes --follow` whose backend is terminated twice (once while changes keep coming)
    /// connects again and goes on after the last id it printed: every change of the feed is
    /// printed exactly once, in id order, and SIGTERM still ends it with exit 0.
    @Test func followSurvivesItsBackendBeingTerminatedAndPrintsEveryChangeExactlyOnce() async throws {
        let harness = try RecoveryHarness(customers: 3, seed: 40)
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            let output = scratch.appendingPathComponent("follow.jsonl").path
            let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(descriptor >= 0)
            let follower = try ChildProcess.spawn(
                BuiltBinary.path, ["changes", "--after", "0", "--follow"], environment: BuiltBinary.environment(environment),
                standardOutput: descriptor
            )
            close(descriptor)
            let follow = FollowerOutput(path: output)
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            try await Self.writeChange(store, 0)
            #expect(await follow.waitFor(1, seconds: 20) != nil, "the follower printed the first change")

            #expect(try await Self.terminateFollower(client) == 1, "the follower's connection was found and ended")
            for index in 1...4 { try await Self.writeChange(store, index) }
            #expect(await follow.waitFor(5, seconds: 30) != nil, "the follower came back and printed what was committed meanwhile")
            // Again, with changes committed while it reconnects.
            #expect(try await Self.terminateFollower(client) == 1)
            for index in 5...8 {
                try await Self.writeChange(store, index)
                try await Task.sleep(for: .milliseconds(150))
            }
            _ = await follow.waitFor(9, seconds: 30)
            // A sentinel committed last: the follower prints in id order, so once it is printed,
            // a change printed twice would already stand before it.
            try await Self.writeChange(store, 9)
            _ = await follow.waitFor(10, seconds: 30)

            var all: [Int] = []
            for try await id in try await client.query("SELECT id::int FROM app_store.changes ORDER BY id").decode(Int.self) { all.append(id) }
            let printed = try follow.lines.map { try #require(try Self.object($0)["id"] as? Int) }
            #expect(all.count == 10)
            #expect(printed == all, "every change exactly once, in order: printed \(printed.count) of \(all.count)")
            follower.send(SIGTERM)
            #expect(await follower.waitAsync() == 0)
        }
    }
}

/// The latency of `changes --follow`, timed alone: `./scripts/test` runs it after the rest of the
/// suite (APPSTORE_TIMING_TESTS=1), because with 60 suites in parallel on two cores every process
/// waits its turn for the CPU (measured: 1.4 to 2.3 s for what takes 6 to 20 ms alone).
@Suite("changes --follow latency (timed, run alone)")
struct FollowLatencyTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["APPSTORE_TIMING_TESTS"] == "1", "timed: run alone by ./scripts/test"))
    func followPrintsAChangeCommittedByAnotherProcessWithinASecond() async throws {
        let harness = try RecoveryHarness(customers: 3, seed: 39)
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            let output = scratch.appendingPathComponent("follow.jsonl").path
            let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(descriptor >= 0)
            let follower = try ChildProcess.spawn(
                BuiltBinary.path, ["changes", "--after", "0", "--follow"], environment: BuiltBinary.environment(environment), standardOutput: descriptor
            )
            close(descriptor)
            let last = 0
            let follow = FollowerOutput(path: output)
            // The follower is up and listening once it has printed a first change.
            let store = LedgerStore(client: client, logger: TestDatabase.logger)
            var first = LedgerBatch(cause: .webhook)
            var row = SubscriptionRecord(
                originalTransactionId: "9000000000000000", productId: "com.example.followed", status: 1, expiresDate: nil, autoRenewStatus: 1,
                autoRenewProductId: nil, isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date()
            )
            row.environment = "Sandbox"
            row.bundleId = "com.example.simulated"
            first.subscriptions = [row]
            _ = try await store.apply(first, runId: nil)
            #expect(await follow.waitFor(1, seconds: 20) != nil, "the follower printed the first change")
            // Another process (this one) commits a change through the tool's own write path; the
            // follower prints it within a second. Timed from just before the commit began, so the
            // figure is at least the real delay; three commits, each under a second.
            var delays: [Double] = []
            for attempt in 1...3 {
                var batch = LedgerBatch(cause: .webhook)
                var row = SubscriptionRecord(
                    originalTransactionId: "900000000000000\(attempt)", productId: "com.example.followed", status: 1, expiresDate: nil,
                    autoRenewStatus: 1, autoRenewProductId: nil, isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date()
                )
                row.environment = "Sandbox"
                row.bundleId = "com.example.simulated"
                batch.subscriptions = [row]
                let committing = Date()
                _ = try await store.apply(batch, runId: nil)
                let seen = try #require(await follow.waitFor(1 + attempt, seconds: 10), "the follower printed the new commit")
                let newChange = try ChangesCommandTests.object(follow.lines[attempt])
                #expect(newChange["original_transaction_id"] as? String == "900000000000000\(attempt)")
                #expect((newChange["id"] as? Int ?? 0) > last)
                delays.append(seen.timeIntervalSince(committing))
            }
            #expect(delays.allSatisfy { $0 < 1.0 }, "printed \(delays) s after each commit began")
            print("changes --follow printed another process's commits \(delays.map { Int($0 * 1000) }) ms after each began")

            follower.send(SIGTERM)
            #expect(await follower.waitAsync() == 0)
        }
    }
}

/// What a `changes --follow` child prints, read from the file its output goes to.
struct FollowerOutput: Sendable {
    let path: String

    var lines: [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// When the file first held `count` lines (nil: not within `seconds`). Watched from a thread
    /// of its own: under the whole suite the concurrency pool can be busy for seconds, and a
    /// Task.sleep there would time the pool, not the follower.
    func waitFor(_ count: Int, seconds: Double) async -> Date? {
        await withCheckedContinuation { continuation in
            Thread {
                let deadline = Date().addingTimeInterval(seconds)
                while Date() < deadline {
                    if lines.count >= count {
                        continuation.resume(returning: Date())
                        return
                    }
                    usleep(2_000)
                }
                continuation.resume(returning: nil)
            }.start()
        }
    }
}
