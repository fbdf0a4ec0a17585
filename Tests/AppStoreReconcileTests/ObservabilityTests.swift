import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres
#if canImport(Glibc)
import Glibc
#endif

@Suite("Logs, metrics and secrets")
struct ObservabilityTests {
    @Test func aRunLogsJSONLinesWritesPrometheusMetricsAndNeverPrintsTheKeyOrThePassword() async throws {
        var options = SimulatorOptions()
        let harness0 = try RecoveryHarness(customers: 30, seed: 131)
        options.tamperedNotifications = [try #require(harness0.scenario.missedNotifications.first).uuid]
        let harness = try RecoveryHarness(customers: 30, seed: 131, options: options)
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            let password = "Pw-" + UUID().uuidString
            let wrongPassword = "Wrong-" + UUID().uuidString
            let role = ThrowawayPostgres.passwordRole
            // Role names and passwords cannot be bound parameters; these are made of UUID characters.
            try await client.query(PostgresQuery(unsafeSQL: """
                DO $$ BEGIN
                  IF EXISTS (SELECT FROM pg_roles WHERE rolname = '\(role)') THEN ALTER ROLE \(role) LOGIN SUPERUSER PASSWORD '\(password)';
                  ELSE CREATE ROLE \(role) LOGIN SUPERUSER PASSWORD '\(password)'; END IF;
                END $$
                """))
            let url = try #require(environment["DATABASE_URL"])
            let ours = url.hasPrefix("postgresql://postgres@")
            var withPassword = environment
            withPassword["DATABASE_URL"] = url.replacingOccurrences(of: "postgresql://postgres@", with: "postgresql://\(role):\(password)@")
            withPassword["APPSTORE_LOG_LEVEL"] = "trace"
            let metrics = scratch.path + "/metrics.prom"
            var outputs: [String] = []

            let run = try await BuiltBinary.run(
                ["run"] + RunCommandTests.window(harness) + ["--log-format", "json", "--metrics-file", metrics, "--report-dir", scratch.path + "/r"],
                environment: withPassword
            )
            #expect(run.exitCode == 3, "one payload was tampered: \(run.combined)")
            outputs.append(run.combined)
            let lines = run.standardError.split(separator: "\n")
            #expect(lines.count > 10, "trace logging says a lot")
            for line in lines {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object?["message"] != nil && object?["level"] != nil, "not a JSON log line: \(line.prefix(200))")
            }
            let text = try String(contentsOfFile: metrics, encoding: .utf8)
            outputs.append(text)
            let missed = harness.scenario.missedNotifications.count
            // Every series names its App Store: the files of several apps stay apart in one collector.
            let store = "bundle_id=\"\(harness.pair.bundleId)\",environment=\"\(harness.pair.environment.rawValue)\""
            #expect(text.contains("appstore_reconcile_run_outcome{kind=\"run\",\(store),outcome=\"succeeded_with_rejections\"} 1"), "\(text)")
            #expect(text.contains("appstore_reconcile_notifications{kind=\"run\",\(store),result=\"rejected\"} 1"))
            #expect(text.contains("appstore_reconcile_notifications{kind=\"run\",\(store),result=\"missed\"} \(missed - 1)"))
            #expect(text.contains("appstore_reconcile_api_requests{kind=\"run\",\(store),endpoint=\"notificationHistory\",status=\"200\"} \(harness.api.requestCounts["notificationHistory"] ?? -1)"))
            #expect(text.contains("appstore_reconcile_runs{kind=\"run\",\(store),outcome=\"succeeded_with_rejections\"} 1"))
            #expect(text.contains("# TYPE appstore_reconcile_last_success_timestamp_seconds gauge"))
            for directory in ["/r/report.md", "/r/report.json"] { outputs.append(try String(contentsOfFile: scratch.path + directory, encoding: .utf8)) }

            if ours {
                var refused = withPassword
                refused["DATABASE_URL"] = url.replacingOccurrences(of: "postgresql://postgres@", with: "postgresql://\(role):\(wrongPassword)@")
                // A run the database refuses still writes its metrics, saying it failed.
                try FileManager.default.removeItem(atPath: metrics)
                let wrong = try await BuiltBinary.run(["run"] + RunCommandTests.window(harness) + ["--log-format", "text", "--metrics-file", metrics], environment: refused)
                #expect(wrong.exitCode == 78, "\(wrong.combined)")
                #expect(wrong.standardError.contains("refused the credentials"), "\(wrong.standardError)")
                outputs.append(wrong.combined)
                let failed = try String(contentsOfFile: metrics, encoding: .utf8)
                #expect(failed.contains("appstore_reconcile_run_outcome{kind=\"run\",\(store),outcome=\"failed\"} 1"), "\(failed)")
                outputs.append(failed)
            }
            var unreachable = withPassword
            unreachable["DATABASE_URL"] = "postgresql://\(role):\(password)@127.0.0.1:1/ledger"
            let down = try await BuiltBinary.run(["status"], environment: unreachable)
            #expect(down.exitCode == 75, "\(down.combined)")
            outputs.append(down.combined)
            let help = try await BuiltBinary.run(["run", "--help"], environment: withPassword)
            outputs.append(help.combined)

            let key = try String(contentsOfFile: try #require(environment["APPSTORE_PRIVATE_KEY"]), encoding: .utf8)
            let keyLines = key.split(separator: "\n").filter { !$0.hasPrefix("-----") && $0.count >= 16 }
            #expect(!keyLines.isEmpty)
            for output in outputs {
                #expect(!output.contains(password), "the database password leaked")
                #expect(!output.contains(wrongPassword), "a database password leaked")
                for line in keyLines { #expect(!output.contains(line), "the private key leaked") }
                #expect(!output.contains("Bearer ey"), "an API token leaked")
            }
        }
    }
}

@Suite("The private key file")
struct KeyPermissionTests {
    @Test func aKeyReadableByOthersDrawsAWarningAndOneReadableByItsOwnerOnlyDoesNot() async throws {
        let harness = try RecoveryHarness(customers: 3, seed: 191, outageHours: 5)
        try await RunCommandTests.withSetup(harness, seed: false) { environment, _, _ in
            let key = try #require(environment["APPSTORE_PRIVATE_KEY"])
            chmod(key, 0o644)
            // The lines of the key; the webhook's (no serve records here) fail fast and are not what this proves.
            let open = try await BuiltBinary.run(["check", "--webhook-timeout", "1"], environment: environment)
            #expect(open.standardError.contains("is readable by other users (mode 644); chmod 600 it"), "\(open.combined)")
            // Readable by its group, which is the process's own (as under Kubernetes' fsGroup): no warning.
            chown(key, getuid(), getegid())
            chmod(key, 0o640)
            let ownGroup = try await BuiltBinary.run(["check", "--webhook-timeout", "1"], environment: environment)
            #expect(ownGroup.standardOutput.contains("ok   private key"), "\(ownGroup.combined)")
            #expect(!ownGroup.standardError.contains("readable by other users"), "\(ownGroup.combined)")
            chmod(key, 0o600)
            let closed = try await BuiltBinary.run(["check", "--webhook-timeout", "1"], environment: environment)
            #expect(closed.standardOutput.contains("ok   private key"), "\(closed.combined)")
            #expect(!closed.standardError.contains("readable by other users"))
        }
    }
}
