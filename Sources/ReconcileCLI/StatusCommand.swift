import ArgumentParser
import Decisions
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
            it under a day) and on rejected payloads. Also counts, per App Store, the subscriptions Apple owes a \
            notification (a renewal, a billing failure, an expiry) due more than --overdue-after ago with nothing \
            recorded since (app_store.overdue_subscriptions): the webhook may be losing notifications, and the next \
            nightly repairs them. Needs only DATABASE_URL. --json prints the same for scripts.
            """
    )

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @Option(help: "How many recent runs to show.")
    var limit = 10

    @Option(
        help: "How long past its due time a notification Apple owes counts as overdue (the configuration's overdueAfter): 90m, 1h, 1d.",
        transform: Self.duration)
    var overdueAfter: TimeInterval = GapRules.defaultOverdueAfter

    @OptionGroup var database: DatabaseOptions

    static func duration(_ text: String) throws -> TimeInterval {
        guard let seconds = OutageDetection.parseDuration(text), seconds <= 7 * 86_400 else {
            throw ValidationError("expected a duration up to 7d, such as 90m, 1h or 1d, not '\(text.prefix(40))'")
        }
        return seconds
    }

    struct Status: Codable {
        var lastSuccess: LedgerStore.RunSummary?
        var secondsSinceLastSuccess: Int?
        var running: Bool
        var lockHolder: String?
        var runs: [LedgerStore.RunSummary]
        /// With runs of more than one App Store among the recent ones: each one's last success
        /// ("com.example.app Sandbox"), so that one that stopped succeeding is not hidden by another.
        var lastSuccessByAppStore: [String: LedgerStore.RunSummary?]?
        /// Subscriptions Apple owes a notification more than `overdueAfterSeconds` past due, per
        /// App Store ("com.example.app Production"; those with none left out).
        var overdueSubscriptions: [String: Int]
        var overdueAfterSeconds: Int
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
                let overdue = try await store.overdueCounts(for: nil, now: Date(), after: overdueAfter)
                return Status(
                    lastSuccess: lastSuccess,
                    secondsSinceLastSuccess: lastSuccess?.finishedAt.map { Int(Date().timeIntervalSince($0)) },
                    running: held, lockHolder: holder.map { "\($0.kind) run \($0.id.uuidString.lowercased()) on \($0.host ?? "?") (pid \($0.pid.map(String.init) ?? "?")) since \($0.startedAt.formatted(.iso8601))" },
                    runs: runs, lastSuccessByAppStore: byPair,
                    overdueSubscriptions: Dictionary(uniqueKeysWithValues: overdue.map { ($0.key.description, $0.value) }),
                    overdueAfterSeconds: Int(overdueAfter)
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
            let overdueTotal = status.overdueSubscriptions.values.reduce(0, +)
            if overdueTotal == 0 {
                print("Overdue: none (no notification Apple owes is more than \(Self.age(status.overdueAfterSeconds)) past due).")
            } else {
                print(
                    "Overdue: \(overdueTotal) subscriptions Apple owes a notification more than \(Self.age(status.overdueAfterSeconds)) past due "
                        + "(the webhook may be losing them; the next nightly repairs them; app_store.overdue_subscriptions lists them):"
                )
                for (pair, count) in status.overdueSubscriptions.sorted(by: { $0.key < $1.key }) { print("  \(pair): \(count)") }
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
