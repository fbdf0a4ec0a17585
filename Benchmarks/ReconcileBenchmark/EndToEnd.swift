import AppStoreSimulator
import Foundation
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import Synchronization
import ThrowawayPostgres
#if canImport(Glibc)
import Glibc
#endif

/// `appstore-reconcile run` (the release binary, a child process) over a simulated outage: the
/// simulator in this process with every notification signed beforehand (its signing is not the
/// reconciler's cost), a throwaway PostgreSQL on the same machine, the ledger filled with what a
/// live server received. The child's CPU and peak memory come from the kernel (wait4).
struct EndToEnd {
    struct Result {
        var notifications: Int
        var customers: Int
        var fetched: Int
        var missed: Int
        var applied: Int
        var historyRequests: Int
        var priorityQueries: Int
        var remainder: String
        var customersChecked: Int
        var customersRepaired: Int
        /// Per pass 2 rule: accounts it selected, and of those the accounts whose rows changed.
        var repairReasons: [String: (selected: Int, changed: Int)] = [:]
        var transactionHistoryRequests: Int
        var statusesRequests: Int
        var passOneSeconds: Double
        var passTwoSeconds: Double
        var cpuSeconds: Double
        /// While the run went: this process's CPU (the simulator serving it) and the whole
        /// machine's (the rest is PostgreSQL, and anything else the machine was doing).
        var simulatorCPUSeconds: Double
        var machineCPUSeconds: Double
        var peakResidentBytes: Int
        var rateLimited: Int
        var lastRateLimitedAfter: Double?
        var exitCode: Int32
        /// The sizes of the run's report.html, report.json and report.md, written in the same run.
        var reportBytes: (html: Int, json: Int, markdown: Int) = (0, 0, 0)
        /// What the run added to the ledger per notification it recorded: table bytes and WAL.
        var ledger = LedgerFootprint.PerNotification()
        /// PostgreSQL's CPU milliseconds per notification the run recorded (its whole run).
        var postgresCPUPerNotification = Double.nan

        var passOnePerSecond: Double { Double(fetched) / passOneSeconds }
        var passTwoPerSecond: Double { Double(customersChecked) / max(passTwoSeconds, 0.001) }
        var cpuPerThousand: Double { cpuSeconds / Double(fetched) * 1000 }
        var simulatorPerThousand: Double { simulatorCPUSeconds / Double(fetched) * 1000 }
        var restPerThousand: Double { max(0, machineCPUSeconds - cpuSeconds - simulatorCPUSeconds) / Double(fetched) * 1000 }
        /// The priority queries' pages: ⌈nᵢ/20⌉ for each (type, subtype) of DID_RENEW, EXPIRED and
        /// CONSUMPTION_REQUEST in the window, one for each such query that finds none.
        var priorityPages = 0
        /// The fewest history requests the plan can take (QueryPlan): the priority queries' pages,
        /// then the unfiltered pass over all `fetched`, which reads the priority ones again.
        var requestBound: Int { priorityPages + (fetched + 19) / 20 }
        /// Pass 2's requests (both endpoints) per account checked.
        var passTwoRequestsPerAccount: Double { Double(transactionHistoryRequests + statusesRequests) / Double(max(customersChecked, 1)) }
        /// How long the run's requests take at Apple's Production limit of 50 a second per
        /// endpoint: pass 1's history pages, then pass 2, whose two endpoints run side by side.
        var secondsAtApplesLimit: Double { Double(historyRequests) / 50 + Double(max(transactionHistoryRequests, statusesRequests)) / 50 }
    }

    let binary: String
    let logger: Logger

    /// A Sandbox world of about `notifications` notifications across a fifth as many customers,
    /// with deliveries failing for the last third of its history (Sandbox never retries).
    static func scenario(notifications target: Int, environment: AppStoreEnvironment = .sandbox, missedShare: Double = 1.0 / 3) -> Scenario {
        var configuration = Scenario.Configuration()
        configuration.environment = environment
        configuration.seed = 2026
        configuration.customers = max(10, Int(Double(target) / 3.97))
        // About one notification per customer per day with these settings: five days for five.
        configuration.history = 5 * 86_400
        let now = configuration.now
        if missedShare > 0 {
            configuration.outage = now.addingTimeInterval(-configuration.history * missedShare)..<now.addingTimeInterval(3600)
        }
        return Scenario(configuration)
    }

    /// - Parameter dryRun: `run --dry-run`: both passes read and verify, nothing is written.
    /// - Parameter prefill: fill the ledger with what the live server received, with this
    ///   process's code (after its migrations); when false, the ledger is empty and made by the
    ///   binary's own `migrate`, so that another build's run writes its own schema.
    func run(
        _ scenario: Scenario, options: SimulatorOptions = SimulatorOptions(), rateFactor: Double = 100, skipRepair: Bool = false,
        prefill: Bool = true, dryRun: Bool = false
    ) async throws -> Result {
        let api = try SimulatedAPI(scenario: scenario, options: options)
        say("  signing \(scenario.notifications.count) notifications once, beforehand…")
        try api.presign()
        let scratch = NSTemporaryDirectory() + "reconcile-benchmark-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let files = try SimulatorFiles.write(for: api, in: scratch)
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        let connectionString = cluster.url()
        let url = try DatabaseURL(connectionString)
        let delivered = prefill ? scenario.deliveredNotifications : []
        if !prefill {
            var environment = ProcessInfo.processInfo.environment
            environment["DATABASE_URL"] = connectionString
            let migrated = try ChildProcess.run(binary, ["migrate"], environment: environment)
            guard migrated.status == 0 else { throw BenchmarkError("migrate exited \(migrated.status): \(migrated.standardError.suffix(300))") }
        }
        if prefill { say("  filling the ledger with the \(delivered.count) notifications the live server received…") }
        if prefill { try await LedgerDatabase.withClient(url, logger: logger) { client in
            _ = try await Migrator().migrate(client, logger: logger)
            let verifier = try SignedDataVerifier(api.verifierConfiguration)
            let ingest = NotificationIngest(verifier: verifier, store: LedgerStore(client: client, logger: logger))
            let signed = try delivered.map { try api.signNotification($0) }
            for start in stride(from: 0, to: signed.count, by: 500) {
                _ = try await ingest.ingest(signedPayloads: Array(signed[start..<min(start + 500, signed.count)]))
            }
        } }
        let statements = try await StatementProfile.reset(connectionString, logger: logger)
        let postmaster = try CPUSample.postmaster(of: cluster.dataDirectory)
        let footprintBefore = try await LedgerFootprint.read(connectionString, logger: logger)
        let databaseBefore = CPUSample.take(service: -1, database: postmaster).database
        let start = scenario.configuration.now.addingTimeInterval(-scenario.configuration.history - 3600)
        let reportDirectory = scratch + "/report"
        let usage = try await SimulatorServer.withRunning(api) { baseURL in
            var environment = ProcessInfo.processInfo.environment
            for (key, value) in files.environment(for: api, baseURL: baseURL) { environment[key] = value }
            environment["DATABASE_URL"] = connectionString
            environment["APPSTORE_LOG_LEVEL"] = "warning"
            var arguments = [
                "run", "--start", start.formatted(.iso8601), "--end", String(Date().unixMilliseconds), "--no-progress",
                "--rate-factor", String(rateFactor), "--report-dir", reportDirectory, "--log-format", "text",
            ]
            if skipRepair { arguments.append("--skip-repair") }
            if dryRun { arguments.append("--dry-run") }
            say("  appstore-reconcile \(arguments.joined(separator: " "))")
            // RECONCILE_BENCH_WRAP="perf record -g -o /tmp/perf.data --" profiles the run.
            let wrapper = ProcessInfo.processInfo.environment["RECONCILE_BENCH_WRAP"]?.split(separator: " ").map(String.init) ?? []
            let child = wrapper.isEmpty
                ? try ChildProcess.spawn(binary, arguments, environment: environment, standardError: 2)
                : try ChildProcess.spawn("/usr/bin/env", wrapper + [binary] + arguments, environment: environment, standardError: 2)
            // Peak memory is the child's own high-water mark (VmHWM), read while it runs: the
            // kernel's ru_maxrss of a child started by posix_spawn counts this process's memory
            // at the exec, which here holds the whole signed world.
            let before = (simulator: CPUTime.process(), machine: CPUTime.machine())
            let peak = PeakMemory(pid: child.pid)
            Thread { peak.watch() }.start()
            let usage = await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: child.waitWithUsage()) }.start()
            }
            return (usage.status, usage.cpuSeconds, peak.value, CPUTime.process() - before.simulator, CPUTime.machine() - before.machine)
        }
        guard usage.0 == 0 || usage.0 == 3 else { throw BenchmarkError("appstore-reconcile run exited \(usage.0)") }
        let decoder = JSONDecoder()
        let report = try decoder.decode(ReportFigures.self, from: Data(contentsOf: URL(fileURLWithPath: reportDirectory + "/report.json")))
        // RECONCILE_BENCH_KEEP_REPORTS=DIR keeps each run's report.json (as DIR/report-<notifications>.json), to read what pass 2 changed.
        if let keep = ProcessInfo.processInfo.environment["RECONCILE_BENCH_KEEP_REPORTS"] {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            let kept = keep + "/report-\(scenario.notifications.count)\(dryRun ? "-dry" : "").json"
            try? FileManager.default.removeItem(atPath: kept)
            try? FileManager.default.copyItem(atPath: reportDirectory + "/report.json", toPath: kept)
        }
        let times = api.rateLimitTimes
        func size(_ name: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: reportDirectory + "/" + name))?[.size] as? Int) ?? 0 }
        var result = Result(
            notifications: scenario.notifications.count, customers: scenario.configuration.customers, fetched: report.counts.fetched,
            missed: report.counts.missed, applied: report.counts.applied, historyRequests: report.counts.apiRequests,
            priorityQueries: report.run.plan.priorityQueries.count, remainder: report.run.plan.remainder,
            customersChecked: report.counts.customersChecked, customersRepaired: report.counts.customersRepaired,
            transactionHistoryRequests: api.requestCounts["transactionHistory"] ?? 0, statusesRequests: api.requestCounts["subscriptionStatuses"] ?? 0,
            passOneSeconds: report.run.passOneSeconds ?? .nan, passTwoSeconds: report.run.passTwoSeconds ?? 0, cpuSeconds: usage.1,
            simulatorCPUSeconds: usage.3, machineCPUSeconds: usage.4,
            peakResidentBytes: usage.2, rateLimited: api.rateLimitedCount,
            lastRateLimitedAfter: times.lastRateLimited.flatMap { last in times.firstRequest.map { last.timeIntervalSince($0) } },
            exitCode: usage.0
        )
        result.reportBytes = (size("report.html"), size("report.json"), size("report.md"))
        result.repairReasons = (report.counts.repairReasons ?? [:]).mapValues { ($0.selected, $0.changed) }
        let windowStart = UnixMilliseconds(start.timeIntervalSince1970 * 1000)
        var perPair: [String: Int] = [:]
        for notification in scenario.notifications
        where notification.signedDate >= windowStart && [.didRenew, .expired, .consumptionRequest].contains(notification.type) {
            perPair["\(notification.type.rawValue)/\(notification.subtype?.rawValue ?? "-")", default: 0] += 1
        }
        result.priorityPages = perPair.values.reduce(0) { $0 + ($1 + 19) / 20 } + max(0, result.priorityQueries - perPair.count)
        let databaseSeconds = CPUSample.take(service: -1, database: postmaster).database - databaseBefore
        let footprintAfter = try await LedgerFootprint.read(connectionString, logger: logger)
        result.ledger = LedgerFootprint.perNotification(from: footprintBefore, to: footprintAfter)
        if statements { try await StatementProfile.print(connectionString, per: max(1, footprintAfter.notifications - footprintBefore.notifications), logger: logger) }
        let recorded = footprintAfter.notifications - footprintBefore.notifications
        if recorded > 0 { result.postgresCPUPerNotification = databaseSeconds * 1000 / Double(recorded) }
        return result
    }
}

/// The parts of report.json the benchmark reads.
struct ReportFigures: Decodable {
    struct Run: Decodable {
        struct Plan: Decodable {
            var priorityQueries: [String]
            var remainder: String
        }
        var plan: Plan
        var passOneSeconds: Double?
        var passTwoSeconds: Double?
    }
    struct Counts: Decodable {
        var fetched: Int
        var missed: Int
        var applied: Int
        var apiRequests: Int
        var customersChecked: Int
        var customersRepaired: Int
        struct ReasonCount: Decodable {
            var selected: Int
            var changed: Int
        }
        /// Pass 2's accounts per rule that selected them (an account selected by two counts under both).
        var repairReasons: [String: ReasonCount]?
    }
    var run: Run
    var counts: Counts
}

/// Follows a process's VmHWM in /proc every 20 ms until the process is gone.
final class PeakMemory: Sendable {
    let pid: pid_t
    private let peak = Mutex(0)

    init(pid: pid_t) { self.pid = pid }

    var value: Int { peak.withLock { $0 } }

    func watch() {
        let path = "/proc/\(pid)/status"
        while let text = try? String(contentsOfFile: path, encoding: .utf8), !text.contains("State:\tZ") {
            if let bytes = Self.highWaterMark(in: text) { peak.withLock { $0 = max($0, bytes) } }
            usleep(20_000)
        }
    }

    /// A running process's high-water mark now (0 when it cannot be read).
    static func read(_ pid: pid_t) -> Int {
        (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)).flatMap(highWaterMark(in:)) ?? 0
    }

    /// VmHWM in bytes, from a /proc/PID/status text.
    static func highWaterMark(in status: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1])
        else { return nil }
        return kilobytes * 1024
    }
}
