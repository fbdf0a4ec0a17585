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

    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"), arguments: [("cronjob.yaml", "nightly"), ("consumption-requests.yaml", "consumption-requests")])
    func theCronJobsParseAndHaveWhatKubernetesRequires(file: String, command: String) throws {
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
            assert c["name"] and c["image"] and c["args"][0] == sys.argv[2], "container"
            names = {e["name"] for e in c["env"]}
            for n in ["APPSTORE_ISSUER_ID", "APPSTORE_KEY_ID", "APPSTORE_PRIVATE_KEY", "APPSTORE_BUNDLE_ID", "APPSTORE_APP_APPLE_ID",
                      "APPSTORE_ENVIRONMENT", "APPSTORE_ROOT_CERTIFICATES", "DATABASE_URL"]:
                assert n in names, n
            mounts = {m["name"] for m in c["volumeMounts"]}
            assert mounts <= {v["name"] for v in t["volumes"]}, "volumes"
            print(" ".join(c["args"]))
            """
        let result = try ChildProcess.run("/usr/bin/env", ["python3", "-c", script, Self.jobs.appendingPathComponent("kubernetes/\(file)").path, command])
        #expect(result.status == 0, "\(result.standardError)")
    }

    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"))
    func theIndexedJobParsesAndRunsOneShardPerIndex() async throws {
        let script = """
            import sys, yaml
            d = yaml.safe_load(open(sys.argv[1]))
            assert d["apiVersion"] == "batch/v1" and d["kind"] == "Job", "kind"
            assert d["metadata"]["name"], "name"
            s = d["spec"]
            assert s["completionMode"] == "Indexed", "completionMode"
            n = s["completions"]
            assert isinstance(n, int) and n > 1 and s["parallelism"] == n, "every shard runs at once (the pass 2 barrier)"
            t = s["template"]["spec"]
            assert t["restartPolicy"] == "Never", "restartPolicy with backoffLimitPerIndex"
            c = t["containers"][0]
            assert c["name"] and c["image"], "container"
            a = c["args"]
            assert a[0] == "run", "run with an explicit window"
            assert a[a.index("--shard") + 1] == "$(JOB_COMPLETION_INDEX)/%d" % n, "shard count equals completions"
            env = {e["name"] for e in c["env"]}
            for n2 in ["APPSTORE_ISSUER_ID", "APPSTORE_KEY_ID", "APPSTORE_PRIVATE_KEY", "APPSTORE_BUNDLE_ID", "APPSTORE_APP_APPLE_ID",
                       "APPSTORE_ENVIRONMENT", "APPSTORE_ROOT_CERTIFICATES", "DATABASE_URL", "WINDOW_START", "WINDOW_END"]:
                assert n2 in env, n2
            mounts = {m["name"] for m in c["volumeMounts"]}
            assert mounts <= {v["name"] for v in t["volumes"]}, "volumes"
            print(" ".join(a))
            """
        let result = try ChildProcess.run("/usr/bin/env", ["python3", "-c", script, Self.jobs.appendingPathComponent("kubernetes/indexed-job.yaml").path])
        #expect(result.status == 0, "\(result.standardError)")
        let help = try await BuiltBinary.run(["run", "--help"]).standardOutput
        let flags = result.standardOutput.split(separator: " ").filter { $0.hasPrefix("--") }
        #expect(flags.count >= 6)
        for flag in flags { #expect(help.contains(String(flag)), "run has \(flag)") }
        // Kubernetes expands $(JOB_COMPLETION_INDEX); the binary accepts what it expands to.
        let shard = try await BuiltBinary.run(["run", "--start", "2026-11-18T02:00:00Z", "--end", "2026-11-18T09:30:00Z", "--shard", "4/4"])
        #expect(shard.exitCode == 64 && shard.standardError.contains("shard index must be 0 to 3"), "\(shard.combined)")
    }

    @Test func everyHourlyJobCallsConsumptionRequestsEveryHourWithFlagsItHas() async throws {
        let help = try await BuiltBinary.run(["consumption-requests", "--help"]).standardOutput
        let cron = try String(contentsOf: Self.jobs.appendingPathComponent("crontab"), encoding: .utf8).split(separator: "\n")
            .filter { !$0.hasPrefix("#") && $0.contains("appstore-reconcile consumption-requests") }.map(String.init)
        #expect(cron.count == 1 && cron.allSatisfy { $0.split(separator: " ")[1] == "*" }, "hourly: \(cron)")
        let timer = try String(contentsOf: Self.jobs.appendingPathComponent("systemd/appstore-reconcile-consumption-requests.timer"), encoding: .utf8)
        #expect(timer.contains("OnCalendar=*-*-* *:07:00"))
        let kubernetes = try String(contentsOf: Self.jobs.appendingPathComponent("kubernetes/consumption-requests.yaml"), encoding: .utf8)
        #expect(kubernetes.contains(#"schedule: "7 * * * *""#))
        var lines = cron
        lines += try String(contentsOf: Self.jobs.appendingPathComponent("systemd/appstore-reconcile-consumption-requests.service"), encoding: .utf8)
            .split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }.map(String.init)
        lines += kubernetes.split(separator: "\n").filter { $0.contains("args:") }.map(String.init)
        #expect(lines.count == 3)
        for line in lines {
            #expect(line.contains("consumption-requests"))
            let flags = line.split(whereSeparator: { $0 == " " || $0 == "\"" || $0 == "," || $0 == "[" }).filter { $0.hasPrefix("--") }
            #expect(!flags.isEmpty)
            for flag in flags { #expect(help.contains(String(flag)), "consumption-requests has \(flag)") }
        }
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

    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"))
    func theServeDeploymentAndServiceParseAndProbeHealthz() async throws {
        let script = """
            import sys, yaml
            docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
            kinds = {d["kind"]: d for d in docs}
            assert set(kinds) == {"Deployment", "Service"}, "kinds"
            dep, svc = kinds["Deployment"], kinds["Service"]
            assert dep["apiVersion"] == "apps/v1" and svc["apiVersion"] == "v1", "apiVersion"
            labels = dep["spec"]["template"]["metadata"]["labels"]
            assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), "selector"
            assert svc["spec"]["selector"].items() <= labels.items(), "service selector"
            t = dep["spec"]["template"]["spec"]
            c = t["containers"][0]
            assert c["args"][0] == "serve", "serve"
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            listen = c["args"][c["args"].index("--listen") + 1]
            assert int(listen.rsplit(":", 1)[1]) == ports["http"], "listen port"
            assert c["resources"]["limits"]["memory"], "a memory limit"
            for probe, path in (("readinessProbe", "/healthz"), ("livenessProbe", "/livez")):
                assert c[probe]["httpGet"]["path"] == path and c[probe]["httpGet"]["port"] in ("http", ports["http"]), probe
            assert svc["spec"]["ports"][0]["targetPort"] in ("http", ports["http"]), "targetPort"
            names = {e["name"] for e in c["env"]}
            for n in ["APPSTORE_BUNDLE_ID", "APPSTORE_ENVIRONMENT", "APPSTORE_ROOT_CERTIFICATES", "DATABASE_URL"]:
                assert n in names, n
            assert {m["name"] for m in c["volumeMounts"]} <= {v["name"] for v in t["volumes"]}, "volumes"
            print(" ".join(c["args"]))
            """
        let result = try ChildProcess.run("/usr/bin/env", ["python3", "-c", script, Self.jobs.appendingPathComponent("kubernetes/serve.yaml").path])
        #expect(result.status == 0, "\(result.standardError)")
        let help = try await BuiltBinary.run(["serve", "--help"]).standardOutput
        var lines = [result.standardOutput]
        lines += try String(contentsOf: Self.jobs.appendingPathComponent("systemd/appstore-reconcile-serve.service"), encoding: .utf8)
            .split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }.map(String.init)
        #expect(lines.count == 2)
        for line in lines {
            for flag in line.split(separator: " ").filter({ $0.hasPrefix("--") }) { #expect(help.contains(String(flag)), "serve has \(flag)") }
        }
    }

    /// Issue 31: no core dumps of a process holding keys and payloads; room for serve's connections.
    @Test func everyServiceDumpsNoCoreAndServeMayOpenManyConnections() throws {
        for name in ["appstore-reconcile.service", "appstore-reconcile-serve.service", "appstore-reconcile-consumption-requests.service"] {
            let lines = try String(contentsOf: Self.jobs.appendingPathComponent("systemd/" + name), encoding: .utf8).split(separator: "\n")
            #expect(lines.contains("LimitCORE=0"), "\(name)")
            if name.contains("serve") {
                let files = lines.first { $0.hasPrefix("LimitNOFILE=") }.flatMap { Int($0.dropFirst("LimitNOFILE=".count)) }
                #expect((files ?? 0) >= 16_384, "\(name): LimitNOFILE")
            }
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze"))
    func theSystemdUnitsVerify() throws {
        let result = try ChildProcess.run(
            "/usr/bin/systemd-analyze",
            [
                "verify", Self.jobs.appendingPathComponent("systemd/appstore-reconcile.service").path,
                Self.jobs.appendingPathComponent("systemd/appstore-reconcile.timer").path,
                Self.jobs.appendingPathComponent("systemd/appstore-reconcile-serve.service").path,
                Self.jobs.appendingPathComponent("systemd/appstore-reconcile-consumption-requests.service").path,
                Self.jobs.appendingPathComponent("systemd/appstore-reconcile-consumption-requests.timer").path,
            ]
        )
        // systemd-analyze also complains about the binary path not existing here; only syntax matters.
        #expect(!result.standardError.contains("Unknown key") && !result.standardError.contains("Failed to parse"), "\(result.standardError)")
    }
}
