import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
import ThrowawayPostgres

/// Faults from Apple, Postgres and the process: each case ends with the ledger a fault-free run of
/// the same scenario leaves (a canonical dump of the app_store tables, ordered, without the times
/// of recording or the runs themselves).
enum Reliability {
    static let customers = 40
    static let seed: UInt64 = 151
    /// One present for every harness of the suite, so that each case's world is the reference's.
    static let now = Date()

    static func harness(_ options: SimulatorOptions = SimulatorOptions()) throws -> RecoveryHarness {
        try RecoveryHarness(customers: customers, seed: seed, options: options, now: now)
    }

    static func content(_ client: PostgresClient, withoutSource: Bool = false) async throws -> [String] {
        let lines = try await RecoveryHarness.dump(client, worldNow: now).filter { !$0.hasPrefix("4:") }
        guard withoutSource else { return lines }
        // Which path recorded a notification (webhook or history) is the only difference a live
        // ingest racing a run may make.
        return lines.map { $0.hasPrefix("0:") ? String($0[..<$0.lastIndex(of: "|")!]) : $0 }
    }

    /// What one ledger's content has that the other's has not, for a failure's message.
    static func difference(_ content: [String], _ reference: [String]) -> String {
        "only here: \(Set(content).subtracting(reference).sorted().prefix(8)); only in the reference: \(Set(reference).subtracting(content).sorted().prefix(8))"
    }

    static func arguments(_ harness: RecoveryHarness, _ directory: String, rateFactor: Int = 20) -> [String] {
        ["run"] + RunCommandTests.window(harness) + ["--no-progress", "--rate-factor", String(rateFactor), "--report-dir", directory, "--log-format", "text"]
    }

    /// The ledger of a fault-free run of the scenario, computed once per process.
    static let reference = Task<[String], any Error> {
        let harness = try Reliability.harness()
        let result = Mutex<[String]>([])
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let run = try await BuiltBinary.run(arguments(harness, scratch.path + "/reference"), environment: environment)
            guard run.exitCode == 0 else { throw ReferenceRunFailed(output: run.combined) }
            let lines = try await content(client)
            result.withLock { $0 = lines }
        }
        return result.withLock { $0 }
    }
}

/// What Apple can do wrong, one kind at a time.
enum AppleFault: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case rateLimitBursts, serverErrorBursts, droppedConnections, truncatedAndNonJSONBodies, addedLatency, tokenExpiringMidWindow

    var testDescription: String { rawValue }

    var options: SimulatorOptions {
        var options = SimulatorOptions()
        switch self {
        case .rateLimitBursts, .serverErrorBursts: break
        case .droppedConnections: options.droppedConnectionRate = 0.15
        case .truncatedAndNonJSONBodies: options.truncatedBodyRate = 0.15
        case .addedLatency: options.latency = .milliseconds(150)
        case .tokenExpiringMidWindow: options.expireTokenOnceAtPage = 2
        }
        return options
    }

    func inject(into api: SimulatedAPI) {
        let soon = Int64((Date().timeIntervalSince1970 + 0.5) * 1000)
        switch self {
        case .rateLimitBursts:
            api.inject(Array(repeating: .error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: soon), count: 4))
        case .serverErrorBursts:
            api.inject(
                Array(repeating: .error(status: 500, errorCode: 5_000_001, message: "An unknown error occurred. Please try again."), count: 2)
                    + [.error(status: 503, errorCode: 5_000_000, message: "An unknown error occurred."), .error(status: 500, errorCode: 5_000_000, message: "An unknown error occurred.")]
            )
        case .truncatedAndNonJSONBodies:
            api.inject([.garbage, .garbage])
        default: break
        }
    }
}

@Suite("Reliability: faults from Apple")
struct AppleFaultTests {
    @Test(arguments: AppleFault.allCases)
    func aRunThroughAppleFaultsLeavesTheLedgerOfAFaultFreeRun(_ fault: AppleFault) async throws {
        let reference = try await Reliability.reference.value
        let harness = try Reliability.harness(fault.options)
        fault.inject(into: harness.api)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let run = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/r"), environment: environment)
            #expect(run.exitCode == 0, "\(run.combined)")
            let content = try await Reliability.content(client)
            #expect(content == reference, "\(Reliability.difference(content, reference))")
        }
    }

    @Test func aServerErrorStormLongerThanTheRetryBudgetStopsWith75AndTheNextRunCompletes() async throws {
        let reference = try await Reliability.reference.value
        let harness = try Reliability.harness()
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            harness.api.inject(Array(repeating: .error(status: 503, errorCode: 5_000_000, message: "An unknown error occurred."), count: 4))
            let stopped = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/a") + ["--retry-attempts", "3"], environment: environment)
            #expect(stopped.exitCode == 75, "\(stopped.combined)")
            #expect(stopped.standardError.contains("Apple's API is unavailable"), "\(stopped.standardError)")
            let resumed = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/b") + ["--retry-attempts", "3"], environment: environment)
            #expect(resumed.exitCode == 0, "\(resumed.combined)")
            #expect(try await Reliability.content(client) == reference)
        }
    }

    @Test func a429WithARetryAfterBeyondTheBoundStopsWith75SayingWhenToResumeAndARerunCompletes() async throws {
        let reference = try await Reliability.reference.value
        let harness = try Reliability.harness()
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            // Two hours ahead, as Apple's hourly limits can answer.
            let resume = Date().addingTimeInterval(7200)
            harness.api.inject([.error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: Int64(resume.timeIntervalSince1970 * 1000))])
            let stopped = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/a"), environment: environment)
            #expect(stopped.exitCode == 75, "\(stopped.combined)")
            #expect(stopped.standardError.contains("run the same command again after"), "\(stopped.standardError)")
            let printed = stopped.standardError.components(separatedBy: "again after ").last?.prefix(20).description ?? ""
            let when = try #require(try? Date(printed, strategy: .iso8601), "\(stopped.standardError)")
            #expect(abs(when.timeIntervalSince(resume)) < 5, "the resume time printed is Apple's: \(when) against \(resume)")
            let resumed = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/b"), environment: environment)
            #expect(resumed.exitCode == 0, "\(resumed.combined)")
            #expect(try await Reliability.content(client) == reference)
        }
    }

    @Test func aPageClaimingMoreWithoutATokenStopsTheRunClearlyAndTheNextRunCompletes() async throws {
        let reference = try await Reliability.reference.value
        var options = SimulatorOptions()
        options.hasMoreWithoutTokenAtPage = 1
        let harness = try Reliability.harness(options)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let broken = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/a"), environment: environment)
            #expect(broken.exitCode == 1, "\(broken.combined)")
            #expect(broken.standardError.contains("hasMore but carried no paginationToken"), "\(broken.standardError)")
            let again = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/b"), environment: environment)
            #expect(again.exitCode == 0, "\(again.combined)")
            #expect(try await Reliability.content(client) == reference)
        }
    }
}

@Suite("Reliability: faults from Postgres")
struct PostgresFaultTests {
    /// Polls the ledger until a run has committed checkpoints past `position`.
    static func waitForProgress(_ url: DatabaseURL, past position: Int, logger: Logger) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(90)
        var reached = 0
        while ContinuousClock.now < deadline {
            reached = try await LedgerDatabase.withClient(url, logger: logger) { client in
                for try await sum in try await client.query("SELECT coalesce(sum(position), 0)::int8 FROM app_store.run_checkpoints WHERE query <> 'pass-1'").decode(Int.self) {
                    return sum
                }
                return 0
            }
            if reached > position { return reached }
            try await Task.sleep(for: .milliseconds(200))
        }
        return reached
    }

    @Test func theServerStoppedImmediatelyMidRunStopsItWith75AndARerunAfterRestartConverges() async throws {
        let reference = try await Reliability.reference.value
        let harness = try Reliability.harness()
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        let url = try DatabaseURL(cluster.url())
        try await LedgerDatabase.withClient(url, logger: harness.logger) { client in
            _ = try await Migrator().migrate(client, logger: harness.logger)
            try await harness.seedDeliveredNotifications(LedgerStore(client: client, logger: harness.logger))
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("pg-crash-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let files = try SimulatorFiles.write(for: harness.api, in: scratch)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            var environment = Dictionary(uniqueKeysWithValues: files.environment(for: harness.api, baseURL: baseURL))
            environment["DATABASE_URL"] = cluster.url()
            // At Sandbox's documented 5 requests a second the run lasts long enough to crash under it.
            let log = scratch + "/stderr.log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let descriptor = open(log, O_WRONLY)
            let child = try ChildProcess.spawn(
                BuiltBinary.path, Reliability.arguments(harness, scratch + "/a", rateFactor: 1), environment: BuiltBinary.environment(environment),
                standardError: descriptor
            )
            close(descriptor)
            let reached = try await Self.waitForProgress(url, past: 20, logger: harness.logger)
            #expect(reached > 20)
            try cluster.crash()
            let status = await child.waitAsync()
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(status == 75, "a lost database is a temporary failure: \(output)")
            try cluster.restart()
            let rerun = try await BuiltBinary.run(Reliability.arguments(harness, scratch + "/b"), environment: environment)
            #expect(rerun.exitCode == 0, "\(rerun.combined)")
            let after = try await LedgerDatabase.withClient(url, logger: harness.logger) { client in try await Reliability.content(client) }
            #expect(after == reference, "no partial page remained, nothing was lost or doubled: \(Reliability.difference(after, reference))")
        }
    }

    @Test func aConnectionKilledInsideABatchAndAStatementTimeoutStopTheRunWith75AndARerunConverges() async throws {
        let reference = try await Reliability.reference.value
        let harness = try Reliability.harness()
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let database = try DatabaseURL(try #require(environment["DATABASE_URL"])).database
            // A statement timeout, met by a table another session holds locked: the run's first
            // read of the ledger waits for the lock and is cancelled after half a second.
            try await client.query(PostgresQuery(unsafeSQL: "ALTER DATABASE \(database) SET statement_timeout = '500ms'"))
            let url = try DatabaseURL(try #require(environment["DATABASE_URL"]))
            let timedOut = try await LedgerDatabase.withClient(url, logger: harness.logger) { locker in
                try await locker.withTransaction(logger: harness.logger) { connection in
                    try await connection.query("SET LOCAL statement_timeout = 0", logger: harness.logger)
                    try await connection.query("LOCK TABLE app_store.notifications IN ACCESS EXCLUSIVE MODE", logger: harness.logger)
                    return try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/a"), environment: environment)
                }
            }
            #expect(timedOut.exitCode == 75, "\(timedOut.combined)")
            #expect(timedOut.standardError.contains("statement timeout"), "\(timedOut.standardError)")
            try await client.query(PostgresQuery(unsafeSQL: "ALTER DATABASE \(database) RESET statement_timeout"))

            // Connections killed while the run writes: whatever page was in flight is rolled back.
            let child = try BuiltBinary.start(Reliability.arguments(harness, scratch.path + "/b", rateFactor: 1), environment: environment)
            _ = try await PostgresFaultTests.waitForProgress(try DatabaseURL(try #require(environment["DATABASE_URL"])), past: 20, logger: harness.logger)
            try await client.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(database) AND pid <> pg_backend_pid()"
            )
            let killed = await child.waitAsync()
            #expect(killed == 75, "a lost connection is a temporary failure")
            let rerun = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/c"), environment: environment)
            #expect(rerun.exitCode == 0, "\(rerun.combined)")
            let content = try await Reliability.content(client)
            #expect(content == reference, "\(Reliability.difference(content, reference))")
        }
    }
}

@Suite("Reliability: faults of the process")
struct ProcessFaultTests {
    @Test(arguments: [1, 2, 3])
    func aRunKilledAtARandomPointThenRunAgainConverges(seed: Int) async throws {
        let reference = try await Reliability.reference.value
        let harness = try Reliability.harness()
        var random = SeededGenerator(seed: UInt64(seed))
        let delay = Double.random(in: 0.3...4, using: &random)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let child = try BuiltBinary.start(Reliability.arguments(harness, scratch.path + "/a", rateFactor: 1), environment: environment)
            try await Task.sleep(for: .seconds(delay))
            child.send(SIGKILL)
            _ = await child.waitAsync()
            let rerun = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/b"), environment: environment)
            #expect(rerun.exitCode == 0, "killed after \(delay) s: \(rerun.combined)")
            #expect(try await Reliability.content(client) == reference, "killed after \(delay) s")
        }
    }

    @Test func aLiveIngestOfTheSameNotificationsRacingARunRecordsEachOnce() async throws {
        let reference = try await Reliability.reference.value.map { $0.hasPrefix("0:") ? String($0[..<$0.lastIndex(of: "|")!]) : $0 }
        let harness = try Reliability.harness()
        var random = SeededGenerator(seed: 5)
        let missed = harness.scenario.missedNotifications.shuffled(using: &random)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            let signed = try missed.map { try harness.api.signNotification($0) }
            async let run = BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/a", rateFactor: 2), environment: environment)
            for payload in signed {
                _ = try await ingest.ingest(signedPayload: payload)
                try await Task.sleep(for: .milliseconds(20))
            }
            let result = try await run
            #expect(result.exitCode == 0, "\(result.combined)")
            // Which accounts pass 2 asks Apple about follows from what the run recovered (a
            // one-time purchase recorded live selects no one; recovered, it selects its account for
            // its transaction history), and that depends on the race: the accounts' verifications
            // ("3:" lines) are left out, every row of the ledger's content is compared.
            let content = try await Reliability.content(client, withoutSource: true).filter { !$0.hasPrefix("3:") }
            let rows = reference.filter { !$0.hasPrefix("3:") }
            #expect(content == rows, "\(Reliability.difference(content, rows))")
            var count = 0
            for try await value in try await client.query("SELECT count(*) FROM app_store.notifications").decode(Int.self) { count = value }
            #expect(count == harness.scenario.notifications.count, "each notification recorded once")
        }
    }
}

struct ReferenceRunFailed: Error, CustomStringConvertible {
    var output: String
    var description: String { "the fault-free run failed: \(output)" }
}

@Suite("Reliability: bad input")
struct BadInputTests {
    static let expected: [BadPayload: String] = [
        .tampered: "bad_signature", .untrustedRoot: "untrusted_chain", .leafWithoutAppleMarker: "missing_apple_oid",
        .leafExpiredAtSignedDate: "certificate_not_valid_at_time", .wrongBundle: "wrong_bundle", .wrongApp: "wrong_app",
        .wrongEnvironment: "wrong_environment", .malformedJSON: "malformed", .oversized: "malformed",
    ]

    @Test func everyKindOfBadPayloadInHistoryIsRejectedWithItsReasonReportedNeverAppliedAndTheRunGoesOn() async throws {
        let plain = try RecoveryHarness(customers: 120, seed: 171, environment: .production)
        let missed = plain.scenario.missedNotifications.filter { $0.type.rawValue != "TEST" }
        try #require(missed.count >= BadPayload.allCases.count + 5, "the scenario misses enough notifications (\(missed.count))")
        var options = SimulatorOptions()
        let kinds = BadPayload.allCases
        for (kind, notification) in zip(kinds, missed) { options.badPayloads[notification.uuid] = kind }
        let harness = try RecoveryHarness(customers: 120, seed: 171, environment: .production, options: options)
        let byUUID = Dictionary(uniqueKeysWithValues: options.badPayloads.map { ($0.value, $0.key) })
        let bad = Set(options.badPayloads.keys)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let run = try await BuiltBinary.run(["run"] + RunCommandTests.window(harness) + ["--no-progress", "--report-dir", scratch.path + "/r", "--skip-repair"], environment: environment)
            #expect(run.exitCode == 3, "\(run.combined)")
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let report = try decoder.decode(RecoveryReport.self, from: Data(contentsOf: URL(fileURLWithPath: scratch.path + "/r/report.json")))
            var stored: [String: String] = [:]
            for try await (uuid, reason) in try await client.query("SELECT coalesce(notification_uuid, ''), reason FROM app_store.rejected_payloads").decode((String, String).self) {
                stored[uuid] = reason
            }
            let recorded = try await RecoveryHarness.historyUUIDs(client)
            for (kind, reason) in Self.expected {
                let uuid = try #require(byUUID[kind])
                if kind != .malformedJSON && kind != .oversized {
                    #expect(report.rejected.contains { $0.notificationUUID == uuid && $0.reason == reason }, "\(kind) reported as \(reason)")
                    #expect(stored[uuid] == reason, "\(kind) kept in rejected_payloads with its reason")
                }
                #expect(!recorded.contains(uuid), "\(kind) never applied")
            }
            // A payload that is not JSON, or too large to read, names no notification: it is
            // reported and kept by its reason alone.
            #expect(report.rejected.filter { $0.reason == "malformed" }.count == 2)
            var malformedRows = 0
            for try await count in try await client.query("SELECT count(*)::int FROM app_store.rejected_payloads WHERE reason = 'malformed'").decode(Int.self) {
                malformedRows = count
            }
            #expect(malformedRows == 2)
            #expect(report.counts.rejected == Self.expected.count)
            let unknown = try #require(byUUID[.unknownType])
            #expect(recorded.contains(unknown), "a type Apple adds later is verified and recorded, not rejected")
            let good = Set(missed.map(\.uuid)).subtracting(bad)
            #expect(good.isSubset(of: recorded), "the run went on and applied every good missed notification")
        }
    }

    @Test func wrongShapedAnswersFromAppleAreAClearTemporaryErrorNotACrash() async throws {
        let harness = try Reliability.harness()
        try await RunCommandTests.withSetup(harness) { environment, _, scratch in
            harness.api.inject(Array(repeating: .body(#"{"notificationHistory": "none", "hasMore": 1}"#), count: 2) + [.body(#"{"hasMore": false}"#)])
            let run = try await BuiltBinary.run(Reliability.arguments(harness, scratch.path + "/a") + ["--retry-attempts", "3"], environment: environment)
            #expect(run.exitCode == 75, "\(run.combined)")
            #expect(run.standardError.contains("Apple's API is unavailable"), "\(run.standardError)")
            #expect(!run.standardError.contains("Fatal error"))
        }
    }
}
