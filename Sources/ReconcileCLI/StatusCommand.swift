import ArgumentParser
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the last runs, the time since the last success, and whether a run is in progress.",
        discussion: """
            Reads app_store.runs and the run lock. Alert on the age of the last success (nightly runs should keep \
            it under a day) and on rejected payloads. Needs only DATABASE_URL. --json prints the same for scripts.
            """
    )

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @Option(help: "How many recent runs to show.")
    var limit = 10

    @OptionGroup var database: DatabaseOptions

    struct Status: Codable {
        var lastSuccess: LedgerStore.RunSummary?
        var secondsSinceLastSuccess: Int?
        var running: Bool
        var lockHolder: String?
        var runs: [LedgerStore.RunSummary]
        /// With runs of more than one App Store among the recent ones: each one's last success
        /// ("com.example.app Sandbox"), so that one that stopped succeeding is not hidden by another.
        var lastSuccessByAppStore: [String: LedgerStore.RunSummary?]?
    }

    func run() async throws {
        try await withExitStatus {
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.status")
            let status = try await LedgerDatabase.withStore(url, logger: logger) { store in
                let lastSuccess = try await store.lastSuccessfulRun()
                let held = try await store.runLockHeld()
                let holder = held ? try await store.runningRun(anyShard: true) : nil
                let runs = try await store.recentRuns(limit: limit)
                let pairs = Set(runs.compactMap { run in run.bundleId.map { AppStorePair(bundleId: $0, environment: AppStoreEnvironment(rawValue: run.environment)) } })
                var byPair: [String: LedgerStore.RunSummary?]?
                if pairs.count > 1 {
                    byPair = [:]
                    for pair in pairs.sorted() { byPair?[pair.description] = .some(try await store.lastSuccessfulRun(pair: pair)) }
                }
                return Status(
                    lastSuccess: lastSuccess,
                    secondsSinceLastSuccess: lastSuccess?.finishedAt.map { Int(Date().timeIntervalSince($0)) },
                    running: held, lockHolder: holder.map { "\($0.kind) run \($0.id.uuidString.lowercased()) on \($0.host ?? "?") (pid \($0.pid.map(String.init) ?? "?")) since \($0.startedAt.formatted(.iso8601))" },
                    runs: runs, lastSuccessByAppStore: byPair
                )
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                encoder.dateEncodingStrategy = .iso8601
                print(String(decoding: try encoder.encode(status), as: UTF8.self))
                return
            }
            if let last = status.lastSuccess, let seconds = status.secondsSinceLastSuccess {
                print("Last success: \(last.kind) run finished \(last.finishedAt!.formatted(.iso8601)), \(Self.age(seconds)) ago.")
            } else {
                print("Last success: none recorded.")
            }
            for (pair, last) in (status.lastSuccessByAppStore ?? [:]).sorted(by: { $0.key < $1.key }) {
                print("  \(pair): \(last.flatMap { run in run.finishedAt.map { "\(run.kind) run finished \($0.formatted(.iso8601)), \(Self.age(Int(Date().timeIntervalSince($0)))) ago" } } ?? "none recorded").")
            }
            print(status.running ? "In progress: \(status.lockHolder ?? "a run (no row recorded yet)")." : "In progress: nothing (the run lock is free).")
            guard !status.runs.isEmpty else { return }
            print("\nRecent runs:")
            print("  started               kind       outcome                    window                                        fetched  missed  applied  rejected  duration  app")
            for run in status.runs {
                let window = run.windowStart.map { "\($0.formatted(.iso8601)) to \(run.windowEnd?.formatted(.iso8601) ?? "?")" } ?? "-"
                let duration = run.finishedAt.map { Self.age(Int($0.timeIntervalSince(run.startedAt))) } ?? "-"
                var outcome = run.outcome
                if outcome == "running" && !status.running { outcome = "running? (no lock: killed)" }
                print(
                    "  \(run.startedAt.formatted(.iso8601))  \((run.kind + (run.shard.map { " " + $0 } ?? "")).padding(toLength: 9, withPad: " ", startingAt: 0))  "
                        + "\(outcome.padding(toLength: 25, withPad: " ", startingAt: 0))  \(window.padding(toLength: 44, withPad: " ", startingAt: 0))  "
                        + "\(String(run.counts["fetched"] ?? 0).padding(toLength: 7, withPad: " ", startingAt: 0))  "
                        + "\(String(run.counts["missed"] ?? 0).padding(toLength: 6, withPad: " ", startingAt: 0))  "
                        + "\(String(run.counts["applied"] ?? 0).padding(toLength: 7, withPad: " ", startingAt: 0))  "
                        + "\(String(run.counts["rejected"] ?? 0).padding(toLength: 8, withPad: " ", startingAt: 0))  \(duration.padding(toLength: 8, withPad: " ", startingAt: 0))  "
                        + "\(run.bundleId.map { "\($0) \(run.environment)" } ?? run.environment)"
                )
            }
        }
    }

    static func age(_ seconds: Int) -> String {
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return "\(seconds / 3600) h" }
        return "\(seconds / 86_400) days"
    }
}
