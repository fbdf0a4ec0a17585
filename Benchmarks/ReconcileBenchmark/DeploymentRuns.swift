import AppStoreSimulator
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData
import ThrowawayPostgres

/// Issue 33's benchmark: one recovery over two apps, each in Production and Sandbox (four App
/// Stores), by the release binary's `run --config`, side by side (`--concurrent-pairs 4`) against
/// one after the other (`--concurrent-pairs 1`), in alternating rounds, each in a fresh ledger.
/// The tool runs at Apple's rates (`--rate-factor 1`: 50 requests a second per endpoint in
/// Production, 5 in Sandbox, per app) and the simulator enforces the same. Figures: the wall time
/// of each, and the time its requests take at Apple's limits: per App Store, its history pages
/// at its rate, then pass 2's two endpoints side by side; side by side, the slowest App Store's;
/// one after the other, their sum.
struct DeploymentRuns {
    let binary: String
    let logger: Logger

    struct Measured {
        var concurrentPairs: Int
        var seconds: Double
        /// Per App Store: its requests' time at Apple's limits.
        var secondsAtApplesLimits: [AppStorePair: Double]
    }

    /// Apple's documented rate per endpoint per app: Production's, and a tenth in Sandbox.
    static func rate(_ environment: AppStoreEnvironment) -> Double { environment == .production ? 50 : 5 }

    func measure(customers: Int, rounds: Int) async throws -> [Row] {
        var measured: [Measured] = []
        for round in 0..<rounds {
            for concurrentPairs in round % 2 == 0 ? [4, 1] : [1, 4] {
                say("9. Four App Stores, --concurrent-pairs \(concurrentPairs) (round \(round + 1) of \(rounds))…")
                measured.append(try await once(customers: customers, concurrentPairs: concurrentPairs))
                say("   \(number(measured.last!.seconds, 1)) s")
            }
        }
        var rows: [Row] = []
        for concurrentPairs in [4, 1] {
            let runs = measured.filter { $0.concurrentPairs == concurrentPairs }
            let label = concurrentPairs == 4 ? "side by side (--concurrent-pairs 4)" : "one after the other (--concurrent-pairs 1)"
            rows.append(Row(section: "four App Stores", figure: "\(label): wall seconds, each round", value: runs.map { number($0.seconds, 1) }.joined(separator: ", ")))
        }
        if let first = measured.first {
            let perStore = first.secondsAtApplesLimits.sorted { $0.key < $1.key }
            for (pair, seconds) in perStore {
                rows.append(Row(section: "four App Stores", figure: "\(pair): its requests at Apple's limits (\(number(Self.rate(pair.environment))) /s)", value: number(seconds, 1) + " s"))
            }
            rows.append(Row(section: "four App Stores", figure: "at Apple's limits: side by side (the slowest) / one after the other (the sum)",
                value: "\(number(perStore.map(\.value).max() ?? 0, 1)) s / \(number(perStore.map(\.value).reduce(0, +), 1)) s"))
        }
        let mean = { (pairs: Int) -> Double in
            let runs = measured.filter { $0.concurrentPairs == pairs }
            return runs.map(\.seconds).reduce(0, +) / Double(max(1, runs.count))
        }
        rows.append(Row(section: "four App Stores", figure: "one after the other ÷ side by side, measured (mean of rounds)", value: number(mean(1) / max(mean(4), 0.001), 2)))
        return rows
    }

    /// One recovery of a fresh world in a fresh ledger.
    private func once(customers: Int, concurrentPairs: Int) async throws -> Measured {
        let now = Date()
        let world = try SimulatedDeployment(
            apps: [.init(bundleId: "com.example.photos", appAppleId: 1_234_567_890), .init(bundleId: "com.example.recipes", appAppleId: 1_234_567_891)], now: now,
            options: { environment in
                var options = SimulatorOptions()
                options.requestsPerSecond = Self.rate(environment)
                return options
            }
        ) { configuration in
            let production = configuration.environment == .production
            configuration.seed = 33 + (configuration.bundleId.hasSuffix("photos") ? 0 : 2) + (production ? 0 : 1)
            configuration.customers = production ? customers : max(1, customers / 4)
            configuration.outage = now.addingTimeInterval(-9 * 3600)..<now.addingTimeInterval(-3 * 3600)
        }
        for api in world.worlds { try api.presign() }
        let scratch = NSTemporaryDirectory() + "reconcile-benchmark-apps-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        try await LedgerDatabase.withClient(try DatabaseURL(cluster.url()), logger: logger) { client in
            _ = try await Migrator().migrate(client, logger: logger)
            let store = LedgerStore(client: client, logger: logger)
            for api in world.worlds {
                let verifier = try SignedDataVerifier(api.verifierConfiguration)
                try await NotificationIngest(verifier: verifier, store: store).ingest(signedPayloads: try api.scenario.deliveredNotifications.map { try api.signNotification($0) })
            }
        }
        let seconds = try await world.withRunning(logger: logger) { production, sandbox in
            let files = try SimulatorFiles.write(for: world.worlds[0], in: scratch)
            let config = scratch + "/appstore.yaml"
            try world.configurationFile(files: files, production: production, sandbox: sandbox).write(toFile: config, atomically: true, encoding: .utf8)
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APPSTORE_") }
            (environment["DATABASE_URL"], environment["APPSTORE_LOG_LEVEL"]) = (cluster.url(), "warning")
            let arguments = [
                "run", "--config", config, "--start", now.addingTimeInterval(-7 * 86_400 - 3600).formatted(.iso8601), "--end", String(Date().unixMilliseconds),
                "--no-progress", "--rate-factor", "1", "--concurrent-pairs", String(concurrentPairs), "--report-dir", scratch + "/report", "--log-format", "text",
            ]
            let started = ContinuousClock.now
            let child = try ChildProcess.spawn(binary, arguments, environment: environment, standardError: 2)
            let status = await withCheckedContinuation { continuation in Thread { continuation.resume(returning: child.wait()) }.start() }
            guard status == 0 || status == 3 else { throw BenchmarkError("appstore-reconcile run exited \(status)") }
            let elapsed = ContinuousClock.now - started
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        var atLimits: [AppStorePair: Double] = [:]
        for api in world.worlds {
            let configuration = api.scenario.configuration
            let rate = Self.rate(configuration.environment)
            let counts = api.requestCounts
            let passTwo = max(counts["transactionHistory"] ?? 0, counts["subscriptionStatuses"] ?? 0)
            atLimits[AppStorePair(bundleId: configuration.bundleId, environment: configuration.environment)] =
                Double(counts["notificationHistory"] ?? 0) / rate + Double(passTwo) / rate
        }
        return Measured(concurrentPairs: concurrentPairs, seconds: seconds, secondsAtApplesLimits: atLimits)
    }
}
