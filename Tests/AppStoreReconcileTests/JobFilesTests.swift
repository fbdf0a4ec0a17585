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

    /// The Kubernetes manifests that run the tool; each takes the configuration file.
    static let manifests = ["cronjob.yaml", "consumption-requests.yaml", "indexed-job.yaml", "serve.yaml"]

    static func kubernetes(_ file: String) -> String { jobs.appendingPathComponent("kubernetes/\(file)").path }

    /// Runs a check written in Python on YAML files (PyYAML), after `kubernetesPython`'s helpers.
    static func python(_ script: String, _ arguments: [String]) throws -> ChildProcess.Completion {
        try ChildProcess.run("/usr/bin/env", ["python3", "-c", kubernetesPython + "\n" + script] + arguments)
    }

    /// pod_specs(path): the pod templates of a manifest (CronJob, Job, Deployment);
    /// config_map(path): the one ConfigMap of a file.
    static let kubernetesPython = """
        import posixpath, sys, yaml
        def pod_specs(path):
            specs = []
            for d in yaml.safe_load_all(open(path)):
                if not d:
                    continue
                if d["kind"] == "CronJob":
                    specs.append(d["spec"]["jobTemplate"]["spec"]["template"]["spec"])
                elif d["kind"] in ("Job", "Deployment"):
                    specs.append(d["spec"]["template"]["spec"])
            assert specs, "no pod template"
            return specs
        def config_map(path):
            docs = [d for d in yaml.safe_load_all(open(path)) if d]
            assert len(docs) == 1 and docs[0]["apiVersion"] == "v1" and docs[0]["kind"] == "ConfigMap", "one ConfigMap"
            return docs[0]
        """

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
            for n in ["APPSTORE_CONFIG", "DATABASE_URL"]:
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
            for n2 in ["APPSTORE_CONFIG", "DATABASE_URL", "WINDOW_START", "WINDOW_END"]:
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
        // The CronJob's args, and the args with --answer it shows for a configuration with facts.
        lines += kubernetes.split(separator: "\n").filter { $0.contains("args:") }.map(String.init)
        #expect(lines.count == 4)
        #expect(lines.contains { $0.contains("--answer") })
        for file in ["crontab", "systemd/appstore-reconcile-consumption-requests.service"] {
            let text = try String(contentsOf: Self.jobs.appendingPathComponent(file), encoding: .utf8)
            #expect(text.contains("add --answer") && text.contains("refundRequests.facts"), "\(file) says how to answer the requests")
        }
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
            for n in ["APPSTORE_CONFIG", "DATABASE_URL"]:
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

    /// Issue 33: the example ConfigMap holds a configuration file of the contract's keys only
    /// (the tool reads it strictly), several apps, one of them in both environments, and no
    /// `database` (a ConfigMap is no secret: DATABASE_URL comes from the Secret).
    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"))
    func theExampleConfigMapHoldsAConfigurationOfTheContractsKeysOnly() throws {
        let script = """
            m = config_map(sys.argv[1])
            assert m["metadata"]["name"] == "appstore-reconcile-config", "the ConfigMap is appstore-reconcile-config"
            assert list(m["data"]) == ["config.yaml"], "it holds the key config.yaml"
            text = m["data"]["config.yaml"]
            assert "PRIVATE KEY" not in text, "paths, never key material"
            c = yaml.safe_load(text)
            assert isinstance(c, dict), "config.yaml is a mapping"
            assert set(c) <= {"database", "rootCertificates", "apps"}, "top-level keys outside the contract: %s" % sorted(set(c) - {"database", "rootCertificates", "apps"})
            assert "database" not in c, "no database in a ConfigMap: DATABASE_URL holds the password and comes from the Secret"
            contract = {"bundleId", "appAppleId", "issuerId", "keyId", "privateKey", "environments", "apiBaseURL", "deliverTo"}
            apps = c.get("apps")
            assert isinstance(apps, list) and len(apps) >= 2, "apps lists several apps"
            for i, a in enumerate(apps):
                assert isinstance(a, dict), "apps[%d] is a mapping" % i
                assert set(a) <= contract, "apps[%d] has keys outside the contract: %s" % (i, sorted(set(a) - contract))
                for k in ("bundleId", "issuerId", "keyId", "privateKey", "environments"):
                    assert isinstance(a.get(k), (str, list)) and a[k], "apps[%d].%s is given" % (i, k)
                assert isinstance(a["privateKey"], str) and a["privateKey"].startswith("/"), "apps[%d].privateKey is an absolute path" % i
                envs = a["environments"]
                assert isinstance(envs, list) and len(set(envs)) == len(envs) and set(envs) <= {"Production", "Sandbox"}, "apps[%d].environments" % i
                if "Production" in envs:
                    assert isinstance(a.get("appAppleId"), int), "apps[%d].appAppleId is required with Production" % i
                for k in ("apiBaseURL", "deliverTo"):
                    assert set(a.get(k) or {}) <= set(envs), "apps[%d].%s names only listed environments" % (i, k)
            assert len({a["bundleId"] for a in apps}) == len(apps), "each app is listed once"
            assert any(set(a["environments"]) == {"Production", "Sandbox"} for a in apps), "an app in both environments"
            """
        let result = try Self.python(script, [Self.kubernetes("config.yaml")])
        #expect(result.status == 0, "\(result.standardError)")
    }

    /// Issue 33: every manifest sets APPSTORE_CONFIG to config.yaml of a read-only mount of the
    /// ConfigMap `appstore-reconcile-config`, takes DATABASE_URL from the Secret, and sets none of
    /// the one-app variables.
    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"), arguments: JobFilesTests.manifests)
    func everyManifestPointsItsConfigVariableIntoTheConfigMapsMount(file: String) throws {
        let script = """
            data = config_map(sys.argv[2])["data"]
            one_app = {"APPSTORE_ISSUER_ID", "APPSTORE_KEY_ID", "APPSTORE_BUNDLE_ID", "APPSTORE_APP_APPLE_ID", "APPSTORE_ENVIRONMENT",
                       "APPSTORE_PRIVATE_KEY", "APPSTORE_ROOT_CERTIFICATES"}
            for t in pod_specs(sys.argv[1]):
                volumes = {v["name"]: v for v in t["volumes"]}
                for c in t["containers"]:
                    env = {e["name"]: e for e in c["env"]}
                    assert not one_app & set(env), "one-app variables left: %s" % sorted(one_app & set(env))
                    db = env.get("DATABASE_URL", {})
                    assert "value" not in db and db.get("valueFrom", {}).get("secretKeyRef") == {"name": "appstore-reconcile", "key": "database-url"}, "DATABASE_URL from the Secret"
                    path = env.get("APPSTORE_CONFIG", {}).get("value")
                    assert path and path.startswith("/"), "APPSTORE_CONFIG is set to a path"
                    keys = []
                    for m in c["volumeMounts"]:
                        cm = volumes[m["name"]].get("configMap")
                        prefix = m["mountPath"].rstrip("/") + "/"
                        if not cm or cm.get("name") != "appstore-reconcile-config" or not posixpath.normpath(path).startswith(prefix):
                            continue
                        assert m.get("readOnly") is True and "subPath" not in m, "the ConfigMap is mounted read-only, whole"
                        relative = posixpath.normpath(path)[len(prefix):]
                        items = {i["path"]: i["key"] for i in cm.get("items", [{"key": k, "path": k} for k in data])}
                        keys.append(items.get(relative))
                    assert keys == ["config.yaml"], "APPSTORE_CONFIG (%s) is config.yaml of a mount of the ConfigMap appstore-reconcile-config: %s" % (path, keys)
                    assert keys[0] in data, "the ConfigMap has the key config.yaml"
            """
        let result = try Self.python(script, [Self.kubernetes(file), Self.kubernetes("config.yaml")])
        #expect(result.status == 0, "\(file): \(result.standardError)")
    }

    /// Issue 33: every key file and root certificate the example configuration names is a file
    /// of a read-only, mode 0400 mount of the Secret `appstore-reconcile` in every manifest
    /// (the tool stops with 78 when a privateKey cannot be read). serve, which calls no Apple API
    /// and is the one open to the internet, is given the roots and no key at all.
    @Test(.enabled(if: hasPythonYAML, "needs python3 with PyYAML"), arguments: JobFilesTests.manifests)
    func everyFileTheConfigurationNamesIsMountedFromTheSecret(file: String) throws {
        let script = """
            c = yaml.safe_load(config_map(sys.argv[2])["data"]["config.yaml"])
            assert c.get("rootCertificates"), "the roots come from the file: the manifests set no APPSTORE_ROOT_CERTIFICATES"
            serve = sys.argv[1].endswith("serve.yaml")
            named = [] if serve else [("apps[%d].privateKey" % i, a["privateKey"]) for i, a in enumerate(c["apps"])]
            named += [("rootCertificates[%d]" % i, p) for i, p in enumerate(c["rootCertificates"])]
            for t in pod_specs(sys.argv[1]):
                volumes = {v["name"]: v for v in t["volumes"]}
                for container in t["containers"]:
                    files, under = set(), []
                    for m in container["volumeMounts"]:
                        s = volumes[m["name"]].get("secret")
                        if not s or s.get("secretName") != "appstore-reconcile":
                            continue
                        assert m.get("readOnly") is True and "subPath" not in m, "the Secret is mounted read-only, whole"
                        assert s.get("defaultMode") == 0o400 and all(i.get("mode", 0o400) == 0o400 for i in s.get("items", [])), "the Secret's files are mode 0400"
                        prefix = m["mountPath"].rstrip("/") + "/"
                        if "items" in s:
                            files |= {posixpath.normpath(prefix + i["path"]) for i in s["items"]}
                        else:
                            under.append(prefix)
                    assert files or under, "the Secret appstore-reconcile is mounted"
                    if serve:
                        assert not any(f.endswith(".p8") for f in files) and not under, "serve mounts no API key: %s" % sorted(files)
                    for name, path in named:
                        p = posixpath.normpath(path)
                        assert p in files or any(p.startswith(u) for u in under), "%s (%s) is no file of the Secret appstore-reconcile's mounts %s" % (name, path, sorted(files) + under)
            """
        let result = try Self.python(script, [Self.kubernetes(file), Self.kubernetes("config.yaml")])
        #expect(result.status == 0, "\(file): \(result.standardError)")
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
