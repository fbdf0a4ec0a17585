import Foundation
import TestSupport
import Testing
import ThrowawayPostgres

/// The scheduling files in jobs/ parse and call flags the binary has.
@Suite("jobs/ for cron, systemd and Kubernetes")
struct JobFilesTests {
    static let jobs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("jobs")

    static var hasPythonYAML: Bool {
        (try? ChildProcess.run("/usr/bin/env", ["python3", "-c", "import yaml"]).status) == 0
    }

    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"))
    func theCronJobParsesAndHasWhatKubernetesRequires() throws {
        let script = """
            import sys, yaml
            d = yaml.safe_load(open(sys.argv[1]))
            assert d["apiVersion"] == "batch/v1" and d["kind"] == "CronJob", "kind"
            assert d["metadata"]["name"], "name"
            s = d["spec"]
            assert s["schedule"] and s["concurrencyPolicy"] == "Forbid", "schedule"
            t = s["jobTemplate"]["spec"]["template"]["spec"]
            assert t["restartPolicy"] in ("Never", "OnFailure"), "restartPolicy"
            c = t["containers"][0]
            assert c["name"] and c["image"] and c["args"][0] == "nightly", "container"
            names = {e["name"] for e in c["env"]}
            for n in ["APPSTORE_ISSUER_ID", "APPSTORE_KEY_ID", "APPSTORE_PRIVATE_KEY", "APPSTORE_BUNDLE_ID", "APPSTORE_APP_APPLE_ID",
                      "APPSTORE_ENVIRONMENT", "APPSTORE_ROOT_CERTIFICATES", "DATABASE_URL"]:
                assert n in names, n
            mounts = {m["name"] for m in c["volumeMounts"]}
            assert mounts <= {v["name"] for v in t["volumes"]}, "volumes"
            print(" ".join(c["args"]))
            """
        let result = try ChildProcess.run("/usr/bin/env", ["python3", "-c", script, Self.jobs.appendingPathComponent("kubernetes/cronjob.yaml").path])
        #expect(result.status == 0, "\(result.standardError)")
    }

    @Test func everyJobCallsNightlyWithFlagsItHas() async throws {
        let help = try await BuiltBinary.run(["nightly", "--help"]).standardOutput
        var lines: [String] = []
        lines += try String(contentsOf: Self.jobs.appendingPathComponent("crontab"), encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("appstore-reconcile nightly") }.map(String.init)
        lines += try String(contentsOf: Self.jobs.appendingPathComponent("systemd/appstore-reconcile.service"), encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }.map(String.init)
        lines += try String(contentsOf: Self.jobs.appendingPathComponent("kubernetes/cronjob.yaml"), encoding: .utf8).split(separator: "\n").filter { $0.contains("args:") }.map(String.init)
        #expect(lines.count == 3)
        for line in lines {
            let flags = line.split(whereSeparator: { $0 == " " || $0 == "\"" || $0 == "," || $0 == "[" }).filter { $0.hasPrefix("--") }
            #expect(!flags.isEmpty)
            for flag in flags { #expect(help.contains(String(flag)), "nightly has \(flag)") }
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze"))
    func theSystemdUnitsVerify() throws {
        let result = try ChildProcess.run(
            "/usr/bin/systemd-analyze",
            ["verify", Self.jobs.appendingPathComponent("systemd/appstore-reconcile.service").path, Self.jobs.appendingPathComponent("systemd/appstore-reconcile.timer").path]
        )
        // systemd-analyze also complains about the binary path not existing here; only syntax matters.
        #expect(!result.standardError.contains("Unknown key") && !result.standardError.contains("Failed to parse"), "\(result.standardError)")
    }
}
