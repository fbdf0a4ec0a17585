import AppStoreSimulator
import Foundation
import Ledger
import Logging
import SignedData
import ThrowawayPostgres

/// Issue 51's benchmark (part 12): the release binary's `import --transaction-ids` against the
/// simulator enforcing Apple's Production limit (50 requests a second per endpoint), into a fresh
/// ledger. Figures: requests per account against the pages each account's history needs (goal
/// ≤ 1.2 × pages + 1), the share of the busier endpoint's limit used (goal ≥ 90%), CPU-ms per
/// account; and peak memory importing the same accounts from 10,000 and from 100,000 input lines
/// (goal: flat).
struct ImportRuns {
    let binary: String
    let logger: Logger
    static let rate = 50.0

    struct Measured {
        var seconds: Double
        var cpuSeconds: Double
        var peakBytes: Int
        var counts: [String: Int]
        var status: Int32
    }

    func measure(accounts: Int, memoryAccounts: Int) async throws -> [Row] {
        var rows: [Row] = []
        let world = try Self.world(customers: accounts, seed: 51)
        let pages = world.scenario.customers.reduce(0) { $0 + Self.pages($1, now: world.scenario.configuration.now) }
        let lines = world.scenario.customers.map(Self.laterTransaction)
        say("12. import: \(accounts) accounts (\(pages) history pages) at \(number(Self.rate)) requests/s per endpoint…")
        let paced = try await run(world, lines: lines)
        let statuses = paced.counts["subscriptionStatuses"] ?? 0
        let history = paced.counts["transactionHistory"] ?? 0
        let perAccount = Double(statuses + history) / Double(accounts)
        let goal = 1.2 * Double(pages) / Double(accounts) + 1
        let busier = Double(max(statuses, history))
        let share = busier / paced.seconds / Self.rate
        rows.append(Row(section: "import", figure: "\(accounts) accounts: wall seconds, exit status", value: "\(number(paced.seconds, 1)) s, \(paced.status)"))
        rows.append(Row(section: "import", figure: "history pages the accounts need (Σ⌈transactions/20⌉)", value: String(pages)))
        rows.append(Row(section: "import", figure: "requests per account (statuses + history) vs 1.2 × pages + 1", value: "\(number(perAccount, 2)) vs \(number(goal, 2))", target: "≤ goal", met: perAccount <= goal))
        rows.append(Row(section: "import", figure: "share of the busier endpoint's limit (\(history) history requests)", value: number(share * 100, 1) + "%", target: "≥ 90%", met: share >= 0.9))
        rows.append(Row(section: "import", figure: "CPU-ms per account (the tool's process)", value: number(paced.cpuSeconds * 1000 / Double(accounts), 2)))
        rows.append(Row(section: "import", figure: "429s answered", value: String(paced.counts["rateLimited"] ?? 0)))

        // Memory against the input's size: the same accounts named by 10,000 and by 100,000 lines
        // (every transaction of theirs, over and over), each import into a fresh ledger.
        let small = try Self.world(customers: memoryAccounts, seed: 52)
        let ids = small.scenario.customers.flatMap { customer in Set(customer.transactionVersions.compactMap(\.transaction.transactionId)).sorted() }
        var peaks: [Int: Int] = [:]
        for size in [10_000, 100_000] {
            say("12. import: \(size) lines naming \(memoryAccounts) accounts…")
            let input = (0..<size).map { ids[$0 % ids.count] }
            let measured = try await run(small, lines: input)
            peaks[size] = measured.peakBytes
            rows.append(Row(section: "import", figure: "\(size) lines, \(memoryAccounts) accounts: peak memory, wall seconds",
                value: "\(number(Double(measured.peakBytes) / 1_048_576, 1)) MiB, \(number(measured.seconds, 1)) s"))
        }
        if let ten = peaks[10_000], let hundred = peaks[100_000] {
            let ratio = Double(hundred) / Double(ten)
            rows.append(Row(section: "import", figure: "peak memory, 100,000 lines ÷ 10,000 lines", value: number(ratio, 2) + "×", target: "≤ 1.2×", met: ratio <= 1.2))
        }
        return rows
    }

    /// A Production world whose accounts have a few pages of history each (45 daily periods).
    static func world(customers: Int, seed: UInt64) throws -> SimulatedAPI {
        var configuration = Scenario.Configuration()
        configuration.seed = seed
        configuration.customers = customers
        configuration.environment = .production
        configuration.history = 45 * 86_400
        configuration.renewalShare = 0.95
        configuration.now = Date()
        configuration.outage = configuration.now.addingTimeInterval(-9 * 3600)..<configuration.now.addingTimeInterval(-3 * 3600)
        var options = SimulatorOptions()
        options.requestsPerSecond = rate
        return try SimulatedAPI(scenario: Scenario(configuration), options: options)
    }

    static func pages(_ customer: Scenario.Customer, now: Date) -> Int {
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        let transactions = Set(customer.transactionVersions.filter { $0.modified <= nowMs }.compactMap(\.transaction.transactionId)).count
        return max(1, (transactions + 19) / 20)
    }

    static func laterTransaction(_ customer: Scenario.Customer) -> String {
        customer.transactionVersions.compactMap(\.transaction.transactionId).last { $0 != customer.originalTransactionId } ?? customer.originalTransactionId
    }

    /// One import of `lines` into a fresh ledger, the simulator serving `api`.
    func run(_ api: SimulatedAPI, lines: [String]) async throws -> Measured {
        let scratch = NSTemporaryDirectory() + "reconcile-benchmark-import-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let input = scratch + "/ids.txt"
        try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        try await LedgerDatabase.withClient(try DatabaseURL(cluster.url()), logger: logger) { client in
            _ = try await Migrator().migrate(client, logger: logger)
        }
        let before = api.requestCounts
        let limitedBefore = api.rateLimitedCount
        let measured = try await SimulatorServer.withRunning(api, logger: logger) { baseURL in
            let files = try SimulatorFiles.write(for: api, in: scratch)
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APPSTORE_") }
            for (key, value) in files.environment(for: api, baseURL: baseURL) { environment[key] = value }
            (environment["DATABASE_URL"], environment["APPSTORE_LOG_LEVEL"]) = (cluster.url(), "warning")
            let arguments = ["import", "--transaction-ids", input, "--no-progress", "--report-dir", scratch + "/report"]
            let started = ContinuousClock.now
            let child = try ChildProcess.spawn(binary, arguments, environment: environment, standardError: 2)
            let usage = await withCheckedContinuation { continuation in Thread { continuation.resume(returning: child.waitWithUsage()) }.start() }
            let elapsed = ContinuousClock.now - started
            return Measured(
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, cpuSeconds: usage.cpuSeconds,
                peakBytes: usage.peakResidentBytes, counts: [:], status: usage.status
            )
        }
        guard measured.status == 0 || measured.status == 3 else { throw BenchmarkError("appstore-reconcile import exited \(measured.status)") }
        var counts: [String: Int] = [:]
        for (endpoint, count) in api.requestCounts { counts[endpoint] = count - (before[endpoint] ?? 0) }
        counts["rateLimited"] = api.rateLimitedCount - limitedBefore
        return Measured(seconds: measured.seconds, cpuSeconds: measured.cpuSeconds, peakBytes: measured.peakBytes, counts: counts, status: measured.status)
    }
}
