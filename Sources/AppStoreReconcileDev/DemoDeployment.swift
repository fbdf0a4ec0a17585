import AppStoreSimulator
import Foundation
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import SignedData
import ThrowawayPostgres

/// The demo's world: two apps of one team, each in Production and Sandbox (four App Stores), one
/// simulated Apple, and the deployed tool run on them as a team would run it.
enum DemoDeployment {
    static let apps = [
        SimulatedDeployment.App(bundleId: "com.example.photos", appAppleId: 1_234_567_890),
        SimulatedDeployment.App(bundleId: "com.example.recipes", appAppleId: 1_234_567_891),
    ]

    /// `customers` in each app's Production and a quarter of them in its Sandbox (TestFlight and App
    /// Review), a week of history and an outage from 9 to 3 hours ago. In Production Apple retries
    /// failed deliveries 1, 12, 24… hours later, so what is still missing is what failed in the
    /// outage and has not been retried yet; Sandbox never retries. In the first app's Production,
    /// three events reached neither the webhook nor the history (a refund, a renewal, an expiry):
    /// only pass 2, through Get Transaction History, sets those customers right.
    static func world(customers: Int) throws -> SimulatedDeployment {
        // Apple's rate limits, enforced: the tool paces itself by Apple's documented rates.
        try SimulatedDeployment(apps: apps, options: SimulatorOptions.applesRateLimits, configure: { configuration in
            let production = configuration.environment == .production
            configuration.seed = 2026 + (configuration.bundleId == apps[0].bundleId ? 0 : 2) + (production ? 0 : 1)
            configuration.customers = production ? customers : max(1, customers / 4)
            let now = configuration.now
            configuration.outage = now.addingTimeInterval(-9 * 3600)..<now.addingTimeInterval(-3 * 3600)
            if production && configuration.bundleId == apps[0].bundleId {
                let hidden = Scenario(configuration).notificationsOnlyTransactionHistoryReveals()
                configuration.silencedNotifications = Set([hidden.refund, hidden.renewal, hidden.expiry].compactMap { $0?.uuid })
            }
        })
    }

    /// A line per App Store: its customers, notifications, and those that never reached the server.
    static func describe(_ world: SimulatedDeployment) -> [String] {
        world.worlds.map { api in
            let scenario = api.scenario
            return "  \(scenario.configuration.bundleId) \(scenario.configuration.environment.rawValue): \(scenario.configuration.customers) customers, "
                + "\(scenario.notifications.count) notifications, \(scenario.missedNotifications.count) never reached the server"
                + (scenario.configuration.silencedNotifications.isEmpty ? "" : ", \(scenario.configuration.silencedNotifications.count) events left no notification at all")
        }
    }

    /// Fills the ledger with what each App Store's live server received.
    static func fill(_ world: SimulatedDeployment, store: LedgerStore) async throws {
        for api in world.worlds {
            let ingest = NotificationIngest(verifier: try SignedDataVerifier(api.verifierConfiguration), store: store)
            let delivered = api.scenario.deliveredNotifications
            for start in stride(from: 0, to: delivered.count, by: 500) {
                try await ingest.ingest(signedPayloads: delivered[start..<min(start + 500, delivered.count)].map { try api.signNotification($0) })
            }
        }
    }

    /// The deployed tool, `appstore-reconcile`, beside this executable (`swift build` puts both in one folder).
    static func tool() throws -> String {
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let path = URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("appstore-reconcile").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw DemoFailure("the demo runs appstore-reconcile, expected at \(path): build it with `swift build --product appstore-reconcile` (./scripts/demo does)")
        }
        return path
    }

    /// Runs `appstore-reconcile` with `arguments` against `databaseURL`, its output on ours; its exit status.
    /// None of the caller's APPSTORE_ variables reach it: they would win over the configuration file.
    static func runTool(_ arguments: [String], databaseURL: String) async throws -> Int32 {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APPSTORE_") }
        environment["DATABASE_URL"] = databaseURL
        // Readable lines on any output (the runs log JSON lines when standard error is not a terminal).
        environment["APPSTORE_LOG_FORMAT"] = "text"
        fflush(nil)
        let child = try ChildProcess.spawn(try tool(), arguments, environment: environment, standardOutput: 1, standardError: 2)
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: child.wait()) }
        }
    }

    /// Notifications in the ledger by App Store and by how they came (webhook, recovered).
    static func ledgerByAppStore(_ database: PostgresClient, logger: Logger) async throws -> [String] {
        var lines: [String] = []
        let rows = try await database.query(
            """
            SELECT bundle_id || ' ' || environment, count(*) FILTER (WHERE source = 'webhook')::int8, count(*) FILTER (WHERE source = 'history')::int8
            FROM app_store.notifications GROUP BY bundle_id, environment ORDER BY bundle_id, environment
            """,
            logger: logger
        )
        for try await (store, webhook, recovered) in rows.decode((String, Int64, Int64).self) {
            lines.append("  \(store): \(webhook) from the webhook, \(recovered) recovered")
        }
        return lines
    }
}

/// The demo could not go on: what to do about it.
struct DemoFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
