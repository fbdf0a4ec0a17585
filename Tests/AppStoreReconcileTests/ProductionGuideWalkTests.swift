import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// docs/production.md walked as a person would, with the App Store simulator standing in for
/// Apple (two apps, each in Production and Sandbox, at the simulator's two hosts) and everything
/// else as the guide says: its configuration file named by APPSTORE_CONFIG, `migrate`, one `serve`
/// for every app and environment, the first `nightly` after an outage with its metrics file, and
/// the alert rules of jobs/prometheus on what a failed nightly writes. Each command is printed as
/// it would be typed, and each is one the guide shows.
@Suite("docs/production.md, walked")
struct ProductionGuideWalkTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Prints the command as typed and checks the guide shows it: `appstore-reconcile SUBCOMMAND`
    /// and each flag given.
    static func typed(_ arguments: [String], guide: String) {
        print("$ appstore-reconcile " + arguments.joined(separator: " "))
        #expect(guide.contains("appstore-reconcile \(arguments[0])"), "the guide shows `appstore-reconcile \(arguments[0])`")
        for flag in arguments where flag.hasPrefix("--") {
            #expect(guide.contains(flag), "the guide shows \(flag)")
        }
    }

    @Test func twoAppsInBothEnvironmentsReachOneServeANightlyRecoversTheOutageAndAFailedNightlyFiresItsAlert() async throws {
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/production.md"), encoding: .utf8)
        let world = try DeploymentTests.FourAppStores(customers: 12, outageHours: 12)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("walk-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        // Steps 1 and 2: the In-App Purchase key and Apple's root certificates (the simulator's).
        let files = try SimulatorFiles.write(for: world.harnesses[0].api, in: scratch)
        try await SimulatorServer.withRunning(world.production) { production in
            try await SimulatorServer.withRunning(world.sandbox) { sandbox in
                try await TestDatabase.withFreshLedger(migrated: false) { client, url in
                    // Step 3: one configuration file, every app and both environments.
                    let file = scratch + "/config.yaml"
                    try world.configuration(database: url.connectionString, files: files, production: production, sandbox: sandbox)
                        .write(toFile: file, atomically: true, encoding: .utf8)
                    #expect(guide.contains("APPSTORE_CONFIG="))
                    let environment = ["APPSTORE_CONFIG": file]

                    // Step 4: the ledger.
                    Self.typed(["migrate"], guide: guide)
                    let migrate = try await BuiltBinary.run(["migrate"], environment: environment)
                    #expect(migrate.exitCode == 0, "\(migrate.combined)")

                    // Step 5: one serve receives every app in both environments.
                    Self.typed(["serve", "--listen", "127.0.0.1:0"], guide: guide)
                    let (server, serve, log) = try await ServeCommandTests.spawnServe(arguments: [], environment: environment, scratch: scratch)
                    defer { serve.send(SIGKILL) }
                    var posted = 0
                    for harness in world.harnesses {
                        for notification in harness.scenario.deliveredNotifications {
                            let body = "{\"signedPayload\":\"\(try harness.api.signNotification(notification))\"}"
                            // A 503 (the database slow under the whole suite) is sent again, as Apple does.
                            var (status, text) = try await ServeCommandTests.post(server + "/apple/notifications", body)
                            for _ in 0..<5 where status == 503 {
                                try await Task.sleep(for: .milliseconds(500))
                                (status, text) = try await ServeCommandTests.post(server + "/apple/notifications", body)
                            }
                            #expect(status == 200, "\(harness.pair): \(text)")
                            posted += 1
                        }
                    }
                    var received: [String] = []
                    let rows = try await client.query(
                        "SELECT bundle_id || ' ' || environment FROM app_store.notifications WHERE source = 'webhook' GROUP BY bundle_id, environment ORDER BY 1")
                    for try await line in rows.decode(String.self) { received.append(line) }
                    #expect(received == ["com.example.one Production", "com.example.one Sandbox", "com.example.two Production", "com.example.two Sandbox"],
                            "\(posted) posted; \(String(describing: try? String(contentsOfFile: log, encoding: .utf8).suffix(500)))")

                    // Step 7: the first nightly after the outage, with its metrics file (step 9).
                    let start = world.harnesses.map(\.scenario.configuration.now).min()!
                        .addingTimeInterval(-world.harnesses.map(\.scenario.configuration.history).max()! - 3600)
                    let metrics = scratch + "/appstore-reconcile-nightly.prom"
                    let nightly = ["nightly", "--start", start.formatted(.iso8601), "--no-progress", "--report-dir", scratch + "/reports", "--metrics-file", metrics]
                    Self.typed(nightly, guide: guide)
                    let recovered = try await BuiltBinary.run(nightly, environment: environment)
                    #expect(recovered.exitCode == 0, "\(recovered.combined.suffix(2000))")
                    let missed = Set(world.harnesses.flatMap(\.scenario.missedNotifications).map(\.uuid))
                    #expect(!missed.isEmpty)
                    #expect(try await RecoveryHarness.historyUUIDs(client) == missed, "every App Store's missed notifications, nothing else")
                    let store = LedgerStore(client: client, logger: world.harnesses[0].logger)
                    for harness in world.harnesses {
                        #expect(try await harness.mismatches(store).isEmpty, "\(harness.pair)'s rows are Apple's truth")
                        let report = (try? String(contentsOfFile: "\(scratch)/reports/\(harness.pair.path)/report.md", encoding: .utf8)) ?? ""
                        #expect(report.contains("| App | \(harness.pair.bundleId) |") && report.contains("| Environment | \(harness.pair.environment.rawValue) |"),
                                "each App Store's report names its app and environment: \(report.prefix(400))")
                        let pairFile = scratch + "/appstore-reconcile-nightly-\(harness.pair.bundleId)-\(harness.pair.environment.rawValue).prom"
                        let text = (try? String(contentsOfFile: pairFile, encoding: .utf8)) ?? ""
                        #expect(text.contains("appstore_reconcile_run_outcome{kind=\"nightly\",bundle_id=\"\(harness.pair.bundleId)\",environment=\"\(harness.pair.environment.rawValue)\",outcome=\"succeeded\"} 1"),
                                "\(pairFile): \(text.prefix(300))")
                    }

                    // Step 9: a nightly that fails (the database refuses it) writes that it failed,
                    // and the guide's alert rules fire on it, for each App Store.
                    var unreachable = environment
                    unreachable["DATABASE_URL"] = url.with(database: "no_such_database").connectionString
                    let failing = ["nightly", "--no-progress", "--metrics-file", metrics]
                    Self.typed(failing, guide: guide)
                    let failed = try await BuiltBinary.run(failing, environment: unreachable)
                    #expect(failed.exitCode != 0 && failed.exitCode != 3, "\(failed.combined.suffix(1000))")
                    var series: [String] = []
                    for harness in world.harnesses {
                        let pairFile = scratch + "/appstore-reconcile-nightly-\(harness.pair.bundleId)-\(harness.pair.environment.rawValue).prom"
                        let text = (try? String(contentsOfFile: pairFile, encoding: .utf8)) ?? ""
                        series += text.split(separator: "\n").filter { $0.hasPrefix("appstore_reconcile_run_outcome{") }.map(String.init)
                        #expect(text.contains("outcome=\"failed\"} 1"), "\(pairFile) says the nightly failed: \(text.prefix(300))")
                    }
                    try Self.expectAlertsFire(on: series, in: scratch, pairs: world.harnesses.map(\.pair))
                }
            }
        }
    }

    /// Loads `series` (lines of a metrics file, scraped by node_exporter as job "node") into
    /// promtool's test of jobs/prometheus/alerts.yaml and checks AppStoreReconcileRunFailed fires
    /// for exactly `pairs`.
    static func expectAlertsFire(on series: [String], in scratch: String, pairs: [AppStorePair]) throws {
        try #require(ContainerAndAlertsTests.has("promtool"), ContainerAndAlertsTests.missing("promtool", from: "Debian's prometheus package"))
        var yaml = """
            rule_files:
              - \(root.appendingPathComponent("jobs/prometheus/alerts.yaml").path)
            evaluation_interval: 1m
            tests:
              - interval: 1m
                input_series:

            """
        for line in series {
            guard let brace = line.lastIndex(of: "}"), let space = line[brace...].firstIndex(of: " ") else { continue }
            let labels = line[..<brace] + ",job=\"node\",instance=\"batch-1:9100\"}"
            let value = Double(line[line.index(after: space)...].trimmingCharacters(in: .whitespaces)) ?? -1
            yaml += "          - series: '\(labels)'\n            values: '\(value)x30'\n"
        }
        yaml += """
                promql_expr_test:
                  - expr: count by (alertname, bundle_id, environment) (ALERTS{alertstate="firing", alertname="AppStoreReconcileRunFailed"})
                    eval_time: 10m
                    exp_samples:

            """
        for pair in pairs.sorted() {
            yaml += "              - labels: '{alertname=\"AppStoreReconcileRunFailed\",bundle_id=\"\(pair.bundleId)\",environment=\"\(pair.environment.rawValue)\"}'\n                value: 1\n"
        }
        let path = scratch + "/walk.test.yaml"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        print("$ promtool test rules \(path)")
        let result = try ChildProcess.run("/usr/bin/env", ["promtool", "test", "rules", path])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)\n\(yaml)")
    }
}
