import AppStoreSimulator
import Foundation
import Ledger
import NIOHTTP1
import PostgresNIO
import SignedData
import TestSupport
import ThrowawayPostgres
import Testing

/// One configuration file of two apps, each in its own environment and its own simulated App
/// Store (its own PKI, credentials and rate budget), over one ledger.
@Suite("Several apps and environments from one configuration file")
struct DeploymentTests {
    /// The configuration file a team would write for these simulators.
    static func configuration(_ apps: [(RecoveryHarness, SimulatorFiles, String)], database: String) -> String {
        var text = "database: \(database)\nrootCertificates: [\(apps.map(\.1.rootCertificatePath).joined(separator: ", "))]\napps:\n"
        for (harness, files, baseURL) in apps {
            let configuration = harness.scenario.configuration
            text += """
                  - bundleId: \(configuration.bundleId)
                    appAppleId: \(configuration.appAppleId)
                    issuerId: \(harness.api.credentials.issuerId)
                    keyId: \(harness.api.credentials.keyId)
                    privateKey: \(files.privateKeyPath)
                    environments: [\(configuration.environment.rawValue)]
                    apiBaseURL:
                      \(configuration.environment.rawValue): \(baseURL)

                """
        }
        return text
    }

    /// Every pair's missed notifications applied and nothing else, every pair's rows equal to its
    /// App Store's truth, each pair's report in DIR/<bundleId>/<environment>/ and DIR/report.html
    /// linking them. Each simulator accepts only its own app's JWT (issuer, key, `bid`) and knows
    /// only its own accounts, so a run that asked one with another's credentials or accounts
    /// would have failed or been refused. Then `--app B --environment Production` runs only B.
    @Test func oneRunOverTwoAppsAppliesEachPairsMissedNotificationsAndWritesEachPairsReport() async throws {
        let one = try RecoveryHarness(customers: 30, seed: 71, environment: .sandbox, outageHours: 12) { $0.bundleId = "com.example.one" }
        let two = try RecoveryHarness(customers: 30, seed: 72, environment: .production, outageHours: 12) { $0.bundleId = "com.example.two" }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("deployment-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let oneFiles = try SimulatorFiles.write(for: one.api, in: scratch.path + "/one")
        let twoFiles = try SimulatorFiles.write(for: two.api, in: scratch.path + "/two")
        try await SimulatorServer.withRunning(one.api) { oneURL in
            try await SimulatorServer.withRunning(two.api) { twoURL in
                try await TestDatabase.withFreshLedger { client, url in
                    let store = LedgerStore(client: client, logger: one.logger)
                    try await one.seedDeliveredNotifications(store)
                    try await two.seedDeliveredNotifications(store)
                    let file = scratch.path + "/appstore.yaml"
                    try Self.configuration([(one, oneFiles, oneURL), (two, twoFiles, twoURL)], database: url.connectionString)
                        .write(toFile: file, atomically: true, encoding: .utf8)
                    let start = min(one.scenario.configuration.now, two.scenario.configuration.now)
                        .addingTimeInterval(-max(one.scenario.configuration.history, two.scenario.configuration.history) - 3600)
                    let window = ["--start", start.formatted(.iso8601), "--end", String(Date().unixMilliseconds)]
                    let directory = scratch.path + "/reports"
                    let run = try await BuiltBinary.run(["run", "--config", file, "--report-dir", directory, "--no-progress"] + window)
                    #expect(run.exitCode == 0, "\(run.combined)")
                    let missed = Set((one.scenario.missedNotifications + two.scenario.missedNotifications).map(\.uuid))
                    #expect(try await RecoveryHarness.historyUUIDs(client) == missed, "each pair's missed notifications, nothing else")
                    #expect(try await one.mismatches(store).isEmpty)
                    #expect(try await two.mismatches(store).isEmpty)
                    for path in ["com.example.one/Sandbox", "com.example.two/Production"] {
                        #expect(FileManager.default.fileExists(atPath: "\(directory)/\(path)/report.html"), "\(path)")
                        #expect(FileManager.default.fileExists(atPath: "\(directory)/\(path)/report.json"), "\(path)")
                    }
                    let summary = try String(contentsOfFile: directory + "/report.html", encoding: .utf8)
                    #expect(summary.contains("href=\"com.example.one/Sandbox/report.html\"") && summary.contains("href=\"com.example.two/Production/report.html\""))
                    var apps: [String] = []
                    let rows = try await client.query("SELECT DISTINCT bundle_id || ' ' || environment FROM app_store.notifications ORDER BY 1")
                    for try await line in rows.decode(String.self) { apps.append(line) }
                    #expect(apps == ["com.example.one Sandbox", "com.example.two Production"])

                    let requestsOfOne = one.api.requestCounts.values.reduce(0, +)
                    let narrowed = try await BuiltBinary.run(
                        ["run", "--config", file, "--app", "com.example.two", "--environment", "Production", "--report-dir", scratch.path + "/two-only", "--no-progress"]
                            + window
                    )
                    #expect(narrowed.exitCode == 0, "\(narrowed.combined)")
                    #expect(one.api.requestCounts.values.reduce(0, +) == requestsOfOne, "app one's App Store was not asked")
                    #expect(FileManager.default.fileExists(atPath: scratch.path + "/two-only/report.html"), "one pair: today's layout")
                    var runs: [String] = []
                    for try await line in try await client.query("SELECT bundle_id || ' ' || environment FROM app_store.runs ORDER BY started_at").decode(String.self) {
                        runs.append(line)
                    }
                    #expect(runs.count == 3 && runs.last == "com.example.two Production", "\(runs)")
                    // status reads the database from the file, and names each App Store's last success.
                    let status = try await BuiltBinary.run(["status", "--config", file])
                    #expect(status.exitCode == 0, "\(status.combined)")
                    #expect(status.standardOutput.contains("  com.example.one Sandbox: run run finished"), "\(status.standardOutput)")
                    #expect(status.standardOutput.contains("  com.example.two Production: run run finished"), "\(status.standardOutput)")
                }
            }
        }
    }

    /// Two apps of one team (one key, one Apple), each in Production and Sandbox: the simulated
    /// App Store has one host per environment, and the JWT's `bid` picks the app there.
    struct FourAppStores {
        let harnesses: [RecoveryHarness]
        let production: SimulatedAppStore
        let sandbox: SimulatedAppStore

        init(customers: Int = 30, outageHours: Double = 12) throws {
            let now = Date()
            let apple = (pki: try TestPKI(TestPKI.Options(referenceTime: now)), credentials: SimulatorCredentials())
            var harnesses: [RecoveryHarness] = []
            for (index, (bundleId, environment)) in [
                ("com.example.one", AppStoreEnvironment.production), ("com.example.one", .sandbox), ("com.example.two", .production), ("com.example.two", .sandbox),
            ].enumerated() {
                harnesses.append(
                    try RecoveryHarness(customers: customers, seed: 101 + UInt64(index), environment: environment, outageHours: outageHours, now: now, apple: apple) {
                        $0.bundleId = bundleId
                        $0.appAppleId = bundleId == "com.example.one" ? 1_000_000_001 : 1_000_000_002
                    }
                )
            }
            self.harnesses = harnesses
            production = try SimulatedAppStore(harnesses.filter { $0.pair.environment == .production }.map(\.api))
            sandbox = try SimulatedAppStore(harnesses.filter { $0.pair.environment == .sandbox }.map(\.api))
        }

        func harness(_ bundleId: String, _ environment: AppStoreEnvironment) -> RecoveryHarness {
            harnesses.first { $0.pair == AppStorePair(bundleId: bundleId, environment: environment) }!
        }

        /// The configuration file of both apps in both environments, each host at its URL.
        func configuration(database: String, files: SimulatorFiles, production: String, sandbox: String) -> String {
            SimulatedDeployment.configurationFile(
                apps: [.init(bundleId: "com.example.one", appAppleId: 1_000_000_001), .init(bundleId: "com.example.two", appAppleId: 1_000_000_002)],
                credentials: harnesses[0].api.credentials, privateKeyPath: files.privateKeyPath, rootCertificatePath: files.rootCertificatePath,
                hosts: (production, sandbox), database: database)
        }

        /// Every request each App Store answered, added up.
        func requests(_ harness: RecoveryHarness) -> Int { harness.api.requestCounts.values.reduce(0, +) }
    }

    /// `run --app com.example.two --environment Sandbox` asks only that App Store and changes only
    /// its rows; then one `run` over the configuration applies exactly each pair's missed
    /// notifications, every pair's rows equal its truth, each app's host was asked only with that
    /// app's JWT (the `bid` picks the app, whose own checks refuse any other) and each App Store
    /// only about its own customers; each pair's reports are in DIR/<bundleId>/<environment>/.
    @Test func aNarrowedRunAsksOnlyItsAppStoreThenOneRunOverFourAppStoresAppliesEachOnesMissedNotifications() async throws {
        let world = try FourAppStores()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("four-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let files = try SimulatorFiles.write(for: world.harnesses[0].api, in: scratch.path)
        try await SimulatorServer.withRunning(world.production) { production in
            try await SimulatorServer.withRunning(world.sandbox) { sandbox in
                try await TestDatabase.withFreshLedger { client, url in
                    let store = LedgerStore(client: client, logger: world.harnesses[0].logger)
                    for harness in world.harnesses { try await harness.seedDeliveredNotifications(store) }
                    let file = scratch.path + "/appstore.yaml"
                    try world.configuration(database: url.connectionString, files: files, production: production, sandbox: sandbox)
                        .write(toFile: file, atomically: true, encoding: .utf8)
                    let start = world.harnesses.map(\.scenario.configuration.now).min()!
                        .addingTimeInterval(-world.harnesses.map(\.scenario.configuration.history).max()! - 3600)
                    let window = ["--start", start.formatted(.iso8601), "--end", String(Date().unixMilliseconds), "--no-progress"]

                    let twoSandbox = world.harness("com.example.two", .sandbox)
                    let narrowed = try await BuiltBinary.run(
                        ["run", "--config", file, "--app", "com.example.two", "--environment", "Sandbox", "--report-dir", scratch.path + "/narrowed"] + window)
                    #expect(narrowed.exitCode == 0, "\(narrowed.combined)")
                    for harness in world.harnesses where harness.pair != twoSandbox.pair {
                        #expect(world.requests(harness) == 0, "\(harness.pair) was not asked")
                        #expect(!(try await harness.mismatches(store)).isEmpty, "\(harness.pair)'s rows are as seeded: its missed notifications are still missing")
                    }
                    #expect(world.requests(twoSandbox) > 0)
                    #expect(try await RecoveryHarness.historyUUIDs(client) == Set(twoSandbox.scenario.missedNotifications.map(\.uuid)))
                    #expect(try await twoSandbox.mismatches(store).isEmpty)

                    let directory = scratch.path + "/reports"
                    let run = try await BuiltBinary.run(["run", "--config", file, "--report-dir", directory] + window)
                    #expect(run.exitCode == 0, "\(run.combined)")
                    let missed = Set(world.harnesses.flatMap(\.scenario.missedNotifications).map(\.uuid))
                    #expect(try await RecoveryHarness.historyUUIDs(client) == missed, "each pair's missed notifications, nothing else")
                    for harness in world.harnesses {
                        #expect(try await harness.mismatches(store).isEmpty, "\(harness.pair)")
                        #expect(world.requests(harness) > 0, "\(harness.pair) was asked")
                        let strangers = harness.api.transactionHistoryRequests.filter { harness.scenario.customer(forTransactionId: $0.id) == nil }
                        #expect(strangers.isEmpty, "\(harness.pair) was asked only about its own customers: \(strangers.map(\.id))")
                        #expect(FileManager.default.fileExists(atPath: "\(directory)/\(harness.pair.path)/report.json"), "\(harness.pair)")
                    }
                    var rows: [String] = []
                    for try await line in try await client.query("SELECT DISTINCT bundle_id || ' ' || environment FROM app_store.subscriptions ORDER BY 1").decode(String.self) {
                        rows.append(line)
                    }
                    #expect(rows == ["com.example.one Production", "com.example.one Sandbox", "com.example.two Production", "com.example.two Sandbox"])
                }
            }
        }
    }

    /// `detect-outage` over the configuration scans every App Store with its own client: one
    /// object per pair in --json (its bundleId, its environment, exactly its undelivered
    /// notifications), each `run` command narrowed to its pair, each pair's reports in
    /// DIR/<bundleId>/<environment>/.
    @Test func detectOutageScansEveryAppStoreAndNamesEachOnesRun() async throws {
        struct Scan: Decodable {
            struct Outage: Decodable { var command: String }
            var bundleId: String
            var environment: String
            var undelivered: Int
            var outages: [Outage]
        }
        let world = try FourAppStores()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("detect-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let files = try SimulatorFiles.write(for: world.harnesses[0].api, in: scratch.path)
        try await SimulatorServer.withRunning(world.production) { production in
            try await SimulatorServer.withRunning(world.sandbox) { sandbox in
                let file = scratch.path + "/appstore.yaml"
                try world.configuration(database: "postgresql://unused@127.0.0.1:9/none", files: files, production: production, sandbox: sandbox)
                    .write(toFile: file, atomically: true, encoding: .utf8)
                let directory = scratch.path + "/outages"
                let result = try await BuiltBinary.run(["detect-outage", "--config", file, "--since", "3d", "--gap", "3h", "--json", "--report-dir", directory])
                #expect(result.exitCode == 0, "\(result.combined)")
                let scans = try JSONDecoder().decode([Scan].self, from: Data(result.standardOutput.utf8))
                #expect(scans.map { "\($0.bundleId) \($0.environment)" } == world.harnesses.map(\.pair.description))
                for (scan, harness) in zip(scans, world.harnesses) {
                    #expect(scan.undelivered == harness.scenario.missedNotifications.count, "\(harness.pair)")
                    #expect(!scan.outages.isEmpty, "\(harness.pair)")
                    for outage in scan.outages {
                        #expect(outage.command.hasPrefix("appstore-reconcile run --app \(harness.pair.bundleId) --environment \(harness.pair.environment.rawValue) --start "))
                    }
                    #expect(FileManager.default.fileExists(atPath: "\(directory)/\(harness.pair.path)/report.html"), "\(harness.pair)")
                    #expect(world.requests(harness) > 0, "\(harness.pair) was asked, with its own app's JWT")
                }
            }
        }
    }

    /// How long each App Store's run took, from its row (started to finished), by `bundle_id`.
    static func runSeconds(_ client: PostgresClient) async throws -> [String: Double] {
        var seconds: [String: Double] = [:]
        let rows = try await client.query("SELECT bundle_id, extract(epoch FROM finished_at - started_at)::float8 FROM app_store.runs WHERE finished_at IS NOT NULL")
        for try await (bundleId, duration) in rows.decode((String, Double).self) { seconds[bundleId] = duration }
        return seconds
    }

    /// A 429 storm on app one's endpoint (its first answers say: not before a hold of at least
    /// 30 s, and twice what app two takes alone, from now) holds app one's run, and not app two's,
    /// which runs beside it with its own client and rate budget: app two's run takes about what it
    /// takes alone (measured first, in a ledger of its own, in this test's run), well under the
    /// hold; app one waits the Retry-After out (no request before it) and finishes too. Were the
    /// App Stores run one after the other, or under one rate budget, app two would wait the hold
    /// with app one.
    @Test func a429StormOnOneAppsEndpointDoesNotSlowTheOtherAppsRun() async throws {
        let world = try FourAppStores()
        let one = world.harness("com.example.one", .production)
        let two = world.harness("com.example.two", .production)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("storm-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let files = try SimulatorFiles.write(for: one.api, in: scratch.path)
        try await SimulatorServer.withRunning(world.production) { production in
            let start = world.harnesses.map(\.scenario.configuration.now).min()!.addingTimeInterval(-world.harnesses.map(\.scenario.configuration.history).max()! - 3600)
            let arguments = ["--environment", "Production", "--start", start.formatted(.iso8601), "--end", String(Date().unixMilliseconds), "--no-progress"]
            // App two alone, in a ledger of its own: the time its run takes on this machine now.
            let alone = try await TestDatabase.withFreshLedger { client, url in
                try await two.seedDeliveredNotifications(LedgerStore(client: client, logger: two.logger))
                let file = scratch.path + "/alone.yaml"
                try world.configuration(database: url.connectionString, files: files, production: production, sandbox: "http://127.0.0.1:9")
                    .write(toFile: file, atomically: true, encoding: .utf8)
                let run = try await BuiltBinary.run(["run", "--config", file, "--app", "com.example.two", "--report-dir", scratch.path + "/alone"] + arguments)
                #expect(run.exitCode == 0, "\(run.combined)")
                return try #require(try await Self.runSeconds(client)["com.example.two"])
            }
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: one.logger)
                try await one.seedDeliveredNotifications(store)
                try await two.seedDeliveredNotifications(store)
                let file = scratch.path + "/both.yaml"
                try world.configuration(database: url.connectionString, files: files, production: production, sandbox: "http://127.0.0.1:9")
                    .write(toFile: file, atomically: true, encoding: .utf8)
                // App one is held far longer than app two takes alone on this machine now (under the
                // whole suite, 34.8 s was seen): were app two held with it, its run would take the hold.
                let hold = max(30, 2 * alone + 10)
                let until = Int64((Date().timeIntervalSince1970 + hold) * 1000)
                one.api.inject(Array(repeating: .error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: until), count: 3))
                let run = try await BuiltBinary.run(["run", "--config", file, "--report-dir", scratch.path + "/both"] + arguments)
                #expect(run.exitCode == 0, "\(run.combined)")
                let seconds = try await Self.runSeconds(client)
                let (oneSeconds, twoSeconds) = (try #require(seconds["com.example.one"]), try #require(seconds["com.example.two"]))
                #expect(one.api.requestsBeforeRetryAfter.isEmpty, "app one waited its Retry-After out: \(one.api.requestsBeforeRetryAfter)")
                #expect(oneSeconds >= hold - 2, "app one was held by its 429s: \(oneSeconds) s")
                #expect(twoSeconds < hold - 5 && twoSeconds <= max(3 * alone, alone + 5), "app two: \(twoSeconds) s beside the storm, \(alone) s alone, app one held \(hold) s")
                #expect(try await one.mismatches(store).isEmpty)
                #expect(try await two.mismatches(store).isEmpty)
            }
        }
    }

    /// A configuration file that cannot be used stops every command with exit 78 and a message
    /// naming the key and the file, before anything is asked or written.
    @Test(arguments: [
        ("apps:\n  - bundleId: com.example.app\n    environments: [Sandbox]\n    issuerId: i\n    keyId: k\n    privateKey: /nonexistent/key.p8\n", "apps[0].privateKey"),
        ("apps:\n  - bundleId: com.example.app\n    environments: [Production]\n    issuerId: i\n    keyId: k\n    privateKey: KEY\n", "apps[0].appAppleId"),
        ("apps:\n  - bundleId: com.example.app\n    environments: [Sandbox]\n    issuerId: i\n    keyId: k\n    privateKey: KEY\n    colour: blue\n", "apps[0].colour"),
        ("apps:\n  - {bundleId: a, environments: [Sandbox], issuerId: i, keyId: k, privateKey: KEY}\n  - {bundleId: a, environments: [Production], appAppleId: 1, issuerId: i, keyId: k, privateKey: KEY}\n", "apps[1].bundleId"),
        ("apps: [\n", "the configuration file"),
    ])
    func aConfigurationErrorIsExit78NamingTheKeyAndTheFile(text: String, key: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.path + "/key.p8"
        try "not a key".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let file = directory.path + "/appstore.yaml"
        try text.replacingOccurrences(of: "KEY", with: keyFile).write(toFile: file, atomically: true, encoding: .utf8)
        let run = try await BuiltBinary.run(["run", "--config", file, "--start", "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z"])
        #expect(run.exitCode == 78, "\(run.combined)")
        #expect(run.standardError.contains(key) && run.standardError.contains(file), "\(run.standardError)")
        #expect(!run.standardError.contains("/nonexistent/key.p8"), "a privateKey value is never echoed: it may be a key pasted in")
    }

    /// A file the YAML parser cannot read is reported by line and column: the parser's own
    /// message quotes the line, which may hold the database password.
    @Test func aMalformedFileNamesWhereButNeverQuotesTheLine() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).yaml").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        try "database: postgresql://reconcile:hunter2secret@db/app\napps: [\n  - {bundleId: a\n".write(toFile: file, atomically: true, encoding: .utf8)
        let run = try await BuiltBinary.run(["status", "--config", file])
        #expect(run.exitCode == 78, "\(run.combined)")
        #expect(run.standardError.contains("line"), "\(run.standardError)")
        #expect(!run.combined.contains("hunter2secret"))
    }
}

/// One `serve` for every app and environment of a configuration: one listener, one path.
@Suite("serve for every app and environment")
struct DeploymentServeTests {
    /// Two apps of one team (one key, one Apple), each in Production and Sandbox, and two that
    /// the deployment does not receive: another app, and an app claiming the first's bundle ID
    /// with another appAppleId.
    struct World {
        let stores: [RecoveryHarness]
        let otherApp: RecoveryHarness
        let otherAppAppleId: RecoveryHarness

        init() throws {
            let now = Date()
            let apple = (pki: try TestPKI(TestPKI.Options(referenceTime: now)), credentials: SimulatorCredentials())
            func store(_ bundleId: String, _ environment: AppStoreEnvironment, _ appAppleId: Int64, seed: UInt64) throws -> RecoveryHarness {
                try RecoveryHarness(customers: 3, seed: seed, environment: environment, now: now, apple: apple) {
                    $0.bundleId = bundleId
                    $0.appAppleId = appAppleId
                }
            }
            stores = [
                try store("com.example.one", .production, 1_000_000_001, seed: 91), try store("com.example.one", .sandbox, 1_000_000_001, seed: 92),
                try store("com.example.two", .production, 1_000_000_002, seed: 93), try store("com.example.two", .sandbox, 1_000_000_002, seed: 94),
            ]
            otherApp = try store("com.example.other", .production, 1_000_000_003, seed: 95)
            otherAppAppleId = try store("com.example.one", .production, 1_000_000_009, seed: 96)
        }

        /// The configuration of the two apps, in both environments. Its key files do not exist:
        /// serve calls no Apple API, so the public receiver runs without the API keys.
        func configuration(database: String, files: SimulatorFiles) -> String {
            """
            database: \(database)
            rootCertificates: [\(files.rootCertificatePath)]
            apps:
              - bundleId: com.example.one
                appAppleId: 1000000001
                issuerId: \(stores[0].api.credentials.issuerId)
                keyId: \(stores[0].api.credentials.keyId)
                privateKey: /nonexistent/SubscriptionKey.p8
                environments: [Production, Sandbox]
              - bundleId: com.example.two
                appAppleId: 1000000002
                issuerId: \(stores[0].api.credentials.issuerId)
                keyId: \(stores[0].api.credentials.keyId)
                privateKey: /nonexistent/SubscriptionKey.p8
                environments: [Production, Sandbox]

            """
        }
    }

    /// The body of another of `harness`'s notifications, signed by its Apple with an unknown
    /// field of `bytes` characters added (Apple adds fields; a verifier ignores those it does not know).
    static func padded(_ harness: RecoveryHarness, bytes: Int) throws -> String {
        let notification = try #require(harness.scenario.notifications.dropLast().last)
        let parts = try harness.api.signNotification(notification).split(separator: ".")
        let payload = try #require(Base64URL.decode(parts[1]))
        var object = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        object["padding"] = String(repeating: "x", count: bytes)
        let signed = try harness.api.pki.signer().sign(json: Array(try JSONSerialization.data(withJSONObject: object)))
        return "{\"signedPayload\":\"\(signed)\"}"
    }

    static func body(_ harness: RecoveryHarness) throws -> String {
        let notification = try #require(harness.scenario.notifications.last)
        return "{\"signedPayload\":\"\(try harness.api.signNotification(notification))\"}"
    }

    /// Each of the four App Stores' notifications is answered 200 and recorded under its own app
    /// and environment; one of an app the configuration does not name, and one with another
    /// appAppleId, are answered 400 and kept in rejected_payloads with a reason naming them;
    /// /metrics counts each App Store's notifications under its labels.
    @Test func oneServeRecordsEveryAppAndEnvironmentAndRejectsAnUnconfiguredAppOrAppAppleId() async throws {
        let world = try World()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("serve-apps-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let files = try SimulatorFiles.write(for: world.stores[0].api, in: scratch)
        try await TestDatabase.withFreshLedger { client, url in
            let file = scratch + "/appstore.yaml"
            try world.configuration(database: url.connectionString, files: files).write(toFile: file, atomically: true, encoding: .utf8)
            let (server, serve, log) = try await ServeCommandTests.spawnServe(
                arguments: ["--config", file], environment: [:], scratch: scratch)
            defer {
                serve.send(SIGKILL)
            }
            let endpoint = server + "/apple/notifications"
            for store in world.stores {
                let (status, text) = try await ServeCommandTests.post(endpoint, try Self.body(store))
                #expect(status == 200, "\(store.pair): \(text)")
            }
            let other = try await ServeCommandTests.post(endpoint, try Self.body(world.otherApp))
            #expect(other.0 == 400 && other.1.contains("wrong_bundle"), "\(other)")
            let impostor = try await ServeCommandTests.post(endpoint, try Self.body(world.otherAppAppleId))
            #expect(impostor.0 == 400 && impostor.1.contains("wrong_app"), "\(impostor)")
            // A forgery claiming a configured App Store: 400, counted under no App Store.
            var forged = try Self.body(world.stores[0])
            let index = forged.index(forged.endIndex, offsetBy: -8)
            forged.replaceSubrange(index...index, with: forged[index] == "A" ? "B" : "A")
            #expect(try await ServeCommandTests.post(endpoint, forged).0 == 400)
            // A genuine notification over 64 KB of an App Store other than the first still reaches its own verifier.
            let large = try Self.padded(world.stores[3], bytes: 70_000)
            let (largeStatus, largeText) = try await ServeCommandTests.post(endpoint, large)
            #expect(largeStatus == 200, "\(largeText)")

            var recorded: [String] = []
            let rows = try await client.query("SELECT bundle_id || ' ' || environment || ' ' || count(*) FROM app_store.notifications GROUP BY bundle_id, environment ORDER BY 1")
            for try await line in rows.decode(String.self) { recorded.append(line) }
            #expect(recorded == ["com.example.one Production 1", "com.example.one Sandbox 1", "com.example.two Production 1", "com.example.two Sandbox 2"])
            var transactions: [String] = []
            for try await line in try await client.query("SELECT DISTINCT bundle_id || ' ' || environment FROM app_store.transactions ORDER BY 1").decode(String.self) {
                transactions.append(line)
            }
            #expect(transactions == ["com.example.one Production", "com.example.one Sandbox", "com.example.two Production", "com.example.two Sandbox"])
            var rejected: [String] = []
            for try await (reason, detail) in try await client.query("SELECT reason, detail FROM app_store.rejected_payloads ORDER BY reason").decode((String, String).self) {
                rejected.append(reason + ": " + detail)
            }
            #expect(rejected.count == 3, "\(rejected)")
            #expect(rejected.first { $0.hasPrefix("wrong_app") }?.contains("1000000009") == true, "\(rejected)")
            #expect(rejected.first { $0.hasPrefix("wrong_bundle") }?.contains("com.example.other Production") == true, "\(rejected)")

            let metrics = try await ServeCommandTests.post(server + "/metrics", "", method: .GET).1
            for store in world.stores {
                let series = metrics.split(separator: "\n").filter {
                    $0.hasPrefix("appstore_reconcile_serve_notifications_total{") && $0.contains("bundle_id=\"\(store.pair.bundleId)\"")
                        && $0.contains("environment=\"\(store.pair.environment.rawValue)\"") && $0.contains("outcome=\"recorded\"")
                }
                let expected = store.pair == world.stores[3].pair ? 2 : 1
                #expect(series.count == 1 && series.first?.hasSuffix(" \(expected)") == true, "\(store.pair): \(series)")
            }
            #expect(!metrics.contains("com.example.other"), "no series for an app the configuration does not name")
            // Issue 53, point 4: the wrong appAppleId is Apple's payload naming com.example.one
            // Production, but anyone holding one can send it: like the forgery, it is counted under
            // no App Store (an operator's per-app alert must not fire for it).
            let rejectedUnderAPair = metrics.split(separator: "\n").filter {
                $0.hasPrefix("appstore_reconcile_serve_notifications_total{") && $0.contains("bundle_id=") && $0.contains("outcome=\"rejected\"")
                    && !$0.hasSuffix(" 0")
            }
            #expect(rejectedUnderAPair.isEmpty, "\(rejectedUnderAPair)")
            #expect(try String(contentsOfFile: log, encoding: .utf8).contains("for com.example.one Production, com.example.one Sandbox, com.example.two Production, com.example.two Sandbox"))
        }
    }
}
