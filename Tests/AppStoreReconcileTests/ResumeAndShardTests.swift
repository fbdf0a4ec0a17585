import AppStoreServerAPI
import AppStoreSimulator
@testable import Decisions
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
#if canImport(Glibc)
import Glibc
#endif
import Testing
import ThrowawayPostgres

/// The ledger a run leaves, without the runs themselves (how many there were and how they ended
/// differ between an interrupted and an uninterrupted run by design).
private func ledgerContent(_ client: PostgresClient, _ harness: RecoveryHarness) async throws -> [String] {
    try await RecoveryHarness.dump(client, worldNow: harness.scenario.configuration.now).filter { !$0.hasPrefix("4:") }
}

/// A second ledger, seeded like the first, where the same scenario runs without interruption.
private func referenceLedger(_ harness: RecoveryHarness, environment: [String: String], arguments: [String]) async throws -> [String] {
    try await TestDatabase.withFreshLedger { client, url in
        try await harness.seedDeliveredNotifications(LedgerStore(client: client, logger: harness.logger))
        var environment = environment
        environment["DATABASE_URL"] = url.connectionString
        let result = try await BuiltBinary.run(arguments, environment: environment)
        #expect(result.exitCode == 0, "the reference run: \(result.combined)")
        return try await ledgerContent(client, harness)
    }
}

private func readReport(_ directory: String) throws -> RecoveryReport {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(RecoveryReport.self, from: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json")))
}

private func checkpointPosition(_ client: PostgresClient) async throws -> Int {
    let rows = try await client.query("SELECT coalesce(sum(position), 0)::int8 FROM app_store.run_checkpoints WHERE query <> 'pass-1'")
    for try await sum in rows.decode(Int.self) { return sum }
    return 0
}

@Suite("Checkpoints and resume")
struct ResumeTests {
    @Test func aRunKilledMidWindowResumesFromItsCheckpointAndLeavesTheLedgerOfAnUninterruptedRun() async throws {
        let harness = try RecoveryHarness(customers: 200, seed: 111)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let window = RunCommandTests.window(harness)
            let arguments = ["run"] + window + ["--no-progress", "--rate-factor", "20"]
            // Sandbox's documented rate (5 requests a second) keeps the killed run going long enough.
            let child = try BuiltBinary.start(["run"] + window + ["--no-progress", "--report-dir", scratch.path + "/killed"], environment: environment)
            let deadline = ContinuousClock.now + .seconds(90)
            var position = 0
            while ContinuousClock.now < deadline {
                position = try await checkpointPosition(client)
                if position >= 100 { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            child.send(SIGKILL)
            _ = await child.waitAsync()
            #expect(position >= 100, "the run committed checkpoints before it was killed")
            var outcomes: [String] = []
            for try await outcome in try await client.query("SELECT outcome FROM app_store.runs").decode(String.self) { outcomes.append(outcome) }
            #expect(outcomes == ["running"], "a killed run cannot record its end")
            let requestsBefore = harness.api.requestCounts["notificationHistory"] ?? 0

            let resumed = try await BuiltBinary.run(arguments + ["--report-dir", scratch.path + "/resumed"], environment: environment)
            #expect(resumed.exitCode == 0, "\(resumed.combined)")
            #expect(resumed.standardError.contains("marked abandoned"), "\(resumed.standardError)")
            #expect(resumed.standardError.contains("Resumed an unfinished run"), "\(resumed.standardError)")
            let report = try readReport(scratch.path + "/resumed")
            let taken = try #require(report.run.resumed)
            #expect(taken.notificationsHandledBefore >= position)
            #expect(report.counts.fetched + taken.notificationsHandledBefore >= harness.scenario.notifications.count, "nothing skipped that was not handled")
            #expect(report.counts.fetched < harness.scenario.notifications.count, "what the killed run handled was not fetched again")
            #expect((harness.api.requestCounts["notificationHistory"] ?? 0) - requestsBefore == report.counts.apiRequests)

            outcomes = []
            for try await outcome in try await client.query("SELECT outcome FROM app_store.runs ORDER BY started_at").decode(String.self) { outcomes.append(outcome) }
            #expect(outcomes == ["abandoned", "succeeded"])
            var left = 0
            for try await count in try await client.query("SELECT count(*) FROM app_store.run_checkpoints WHERE query <> 'pass-1'").decode(Int.self) { left = count }
            #expect(left == 0, "a finished run leaves no query checkpoints")

            let reference = try await referenceLedger(harness, environment: environment, arguments: arguments + ["--report-dir", scratch.path + "/reference"])
            #expect(try await ledgerContent(client, harness) == reference, "the resumed ledger equals an uninterrupted run's")
            #expect(try await RecoveryHarness.historyUUIDs(client) == Set(harness.scenario.missedNotifications.map(\.uuid)))

            // The same window again, after success: a fresh run (no resume), which applies nothing.
            let again = try await BuiltBinary.run(arguments + ["--report-dir", scratch.path + "/again"], environment: environment)
            #expect(again.exitCode == 0, "\(again.combined)")
            #expect(!again.standardError.contains("Resumed"))
            #expect(again.standardOutput.contains("fetched \(harness.scenario.notifications.count),"), "\(again.standardOutput)")
            #expect(again.standardOutput.contains("applied 0"))
        }
    }
}

@Suite("Sharding")
struct ShardTests {
    @Test func fourShardsRunningAtOnceLeaveTheLedgerOfOneRun() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 121)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let window = RunCommandTests.window(harness)
            let common = ["run"] + window + ["--no-progress", "--rate-factor", "40"]
            let results = try await withThrowingTaskGroup(of: (Int, BuiltBinary.Result).self) { group in
                for index in 0..<4 {
                    group.addTask {
                        (index, try await BuiltBinary.run(common + ["--shard", "\(index)/4", "--report-dir", scratch.path + "/shard\(index)"], environment: environment))
                    }
                }
                var results: [Int: BuiltBinary.Result] = [:]
                for try await (index, result) in group { results[index] = result }
                return results
            }
            var fetched = 0
            var repaired: Set<String> = []
            for index in 0..<4 {
                let result = try #require(results[index])
                #expect(result.exitCode == 0, "shard \(index): \(result.combined)")
                let report = try readReport(scratch.path + "/shard\(index)")
                #expect(report.run.shard == "\(index)/4")
                fetched += report.counts.fetched
                let customers = Set(report.repairs.map(\.originalTransactionId))
                #expect(customers.isDisjoint(with: repaired), "no customer repaired by two shards")
                repaired.formUnion(customers)
            }
            #expect(fetched >= harness.scenario.notifications.count, "the sub-windows together cover the window")
            var shards: [String] = []
            for try await shard in try await client.query("SELECT shard FROM app_store.runs ORDER BY shard").decode(String.self) { shards.append(shard) }
            #expect(shards == ["0/4", "1/4", "2/4", "3/4"])

            let reference = try await referenceLedger(harness, environment: environment, arguments: common + ["--report-dir", scratch.path + "/one"])
            let content = try await ledgerContent(client, harness)
            #expect(content == reference, "four shards leave the ledger one run leaves: \(Reliability.difference(content, reference))")
        }
    }

    @Test func shardsSplitTheWindowWithoutOverlapAndCustomersByHash() throws {
        let window = try OutageWindow(start: Date(timeIntervalSince1970: 1_700_000_000), end: Date(timeIntervalSince1970: 1_700_036_001.003), environment: .production, now: Date(timeIntervalSince1970: 1_700_100_000))
        for count in [1, 2, 3, 4, 7] {
            let parts = try (0..<count).map { try Shard(index: $0, count: count).subWindow(of: window) }
            #expect(parts.first?.startMilliseconds == window.startMilliseconds)
            #expect(parts.last?.endMilliseconds == window.endMilliseconds)
            for (a, b) in zip(parts, parts.dropFirst()) { #expect(a.endMilliseconds == b.startMilliseconds) }
            let customers = (0..<400).map { "20000000\($0)" }
            for customer in customers {
                #expect(try (0..<count).filter { try Shard(index: $0, count: count).owns(customer: customer) }.count == 1)
            }
        }
        #expect(throws: ShardError.self) { try Shard(parsing: "4/4") }
        #expect(throws: ShardError.self) { try Shard(parsing: "a/4") }
        #expect(try Shard(parsing: "2/4").description == "2/4")
    }
}
