import AppStoreSimulator
import Foundation
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

    @Test func changesPrintsTheFeedAsJSONLinesAndFollowPrintsAnotherProcesssCommitWithinASecond() async throws {
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
            func printed() -> [String] {
                ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            }
            func waitFor(_ count: Int, seconds: Double) async throws -> Date? {
                let deadline = Date().addingTimeInterval(seconds)
                while Date() < deadline {
                    if printed().count >= count { return Date() }
                    try await Task.sleep(for: .milliseconds(10))
                }
                return nil
            }
            #expect(try await waitFor(1, seconds: 20) != nil, "the follower printed the change after --after")

            // Another process commits a change; the follower prints it within a second of its commit.
            let other = try await BuiltBinary.run(["ingest"], environment: environment, standardInput: try Self.body(harness, second))
            #expect(other.exitCode == 0, "\(other.combined)")
            let seen = try #require(try await waitFor(2, seconds: 5), "the follower printed the new commit")
            let printedLines = printed()
            let newChange = try Self.object(printedLines[1])
            #expect(newChange["notification_uuid"] as? String == second.uuid.lowercased())
            #expect((newChange["id"] as? Int ?? 0) > last)
            // changed_at is taken when the row is written, before the commit: the delay measured is at least the real one.
            let changedAt = try #require((newChange["changed_at"] as? String).flatMap { try? Date($0, strategy: .iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: true).timeSeparator(.colon).timeZone(separator: .omitted)) })
            let delay = seen.timeIntervalSince(changedAt)
            #expect(delay < 1.0, "printed \(delay) s after the change was written")
            print("changes --follow printed another process's change \(Int(delay * 1000)) ms after the row was written")

            follower.send(SIGTERM)
            #expect(await follower.waitAsync() == 0, "SIGTERM ends following with exit 0")
            #expect(printed().count >= 2)
        }
    }
}
