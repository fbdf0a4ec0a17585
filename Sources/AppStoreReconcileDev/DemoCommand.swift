import AppStoreServerAPI
import AppStoreSimulator
import ArgumentParser
import Foundation
import Ledger
import Logging
import ReconcileCLI
import Reconciliation
import SignedData
import ThrowawayPostgres

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Recover a simulated outage end to end on embedded defaults: a throwaway PostgreSQL and the App Store simulator.",
        discussion: """
            Needs nothing configured. Starts a private PostgreSQL cluster (deleted at the end) and creates the \
            ledger; starts the App Store simulator with a scenario of --customers customers over a week and an \
            outage of several hours; fills the ledger with what a live server received; then runs a dry run \
            (writes nothing, writes a report), the real run, and a second run that must apply nothing. Prints \
            where the reports are. DATABASE_URL is ignored so that the demo never touches a real ledger; pass \
            --database-url to use a server of your own.
            """
    )

    @Option(name: .customLong("database-url"), help: "Use this PostgreSQL server instead of a throwaway cluster.")
    var databaseURL: String?

    @Option(help: "Customers in the simulated scenario.")
    var customers = 1500

    @Option(help: "Where to write the three runs' reports.")
    var reportDir = "appstore-reconcile-demo"

    func run() async throws {
        try await withExitStatus {
            let logger: Logger = {
                var logger = Logger(label: "appstore-reconcile.demo")
                logger.logLevel = .warning
                return logger
            }()
            var cluster: ThrowawayPostgres?
            defer { cluster?.stop() }
            let url: DatabaseURL
            if let databaseURL {
                url = try Settings(flags: [.databaseURL: databaseURL], environment: [:]).databaseURL()
                print("Using the database at \(url).")
            } else {
                print("Starting a throwaway PostgreSQL cluster…")
                let started = try ThrowawayPostgres.start(logger: logger)
                cluster = started
                url = try DatabaseURL(started.url())
                print("  running in \(started.directory) (removed when the demo ends)")
            }

            // A Production world: Apple retries failed deliveries 1, 12, 24… hours later, so what is
            // still missing is what failed during the outage and whose next retry has not come yet.
            var scenarioConfiguration = Scenario.Configuration()
            scenarioConfiguration.seed = 2026
            scenarioConfiguration.customers = customers
            scenarioConfiguration.environment = .production
            let now = scenarioConfiguration.now
            scenarioConfiguration.outage = now.addingTimeInterval(-9 * 3600)..<now.addingTimeInterval(-3 * 3600)
            // Three events that reached neither the webhook nor the history (a refund, a renewal, an
            // expiry): only pass 2, through Get Transaction History, can set those customers right.
            let hidden = Scenario(scenarioConfiguration).notificationsOnlyTransactionHistoryReveals()
            scenarioConfiguration.silencedNotifications = Set([hidden.refund, hidden.renewal, hidden.expiry].compactMap { $0?.uuid })
            let api = try SimulatedAPI(scenario: Scenario(scenarioConfiguration))
            let scenario = api.scenario
            let bundleId = scenarioConfiguration.bundleId
            let outage = scenarioConfiguration.outage!
            print("""
                Simulating the App Store: \(customers) customers over 7 days, an outage from \(outage.lowerBound.formatted(.iso8601)) \
                to \(outage.upperBound.formatted(.iso8601)).
                  Apple sent \(scenario.notifications.count) notifications; \(scenario.missedNotifications.count) never reached the server, and \
                \(scenarioConfiguration.silencedNotifications.count) events left no notification at all.
                """)
            let verifier = try SignedDataVerifier(
                VerifierConfiguration(
                    rootCertificates: [api.pki.root], bundleId: scenarioConfiguration.bundleId,
                    appAppleId: scenarioConfiguration.appAppleId, environment: .production
                )
            )

            try await LedgerDatabase.withClient(url, logger: logger) { database in
                let outcome = try await Migrator().migrate(database, logger: logger)
                print("Created the ledger schema: \(outcome.applied.isEmpty ? "already up to date" : outcome.applied.joined(separator: ", ")).")
                let store = LedgerStore(client: database, logger: logger)
                let delivered = scenario.deliveredNotifications
                print("Filling the ledger with the \(delivered.count) notifications the live server received…")
                let ingest = NotificationIngest(verifier: verifier, store: store)
                for start in stride(from: 0, to: delivered.count, by: 500) {
                    try await ingest.ingest(signedPayloads: delivered[start..<min(start + 500, delivered.count)].map { try api.signNotification($0) })
                }

                try await SimulatorServer.withRunning(api, logger: logger) { baseURL in
                    let client = AppStoreServerAPIClient(
                        configuration: AppStoreServerAPIConfiguration(
                            credentials: APICredentials(
                                issuerId: api.credentials.issuerId, keyId: api.credentials.keyId,
                                bundleId: bundleId, signingKey: api.credentials.privateKey
                            ),
                            environment: .production, baseURL: try APIBaseURL(baseURL)
                        ),
                        logger: logger
                    )
                    let run = ReconciliationRun(client: client, verifier: verifier, store: store, databaseURL: url, logger: logger, progress: ProgressLine())
                    let window = ReconciliationRun.WindowChoice.fixed(start: now.addingTimeInterval(-7 * 86_400 - 3600), end: Date())
                    for (step, mode, name) in [(1, RunMode.dryRun, "dry-run"), (2, .apply, "run"), (3, .apply, "second-run")] {
                        let title = ["", "Dry run (writes nothing)", "The real run", "A second run, which must apply nothing"][step]
                        let service = RunService(run, job: .recovery(.init(kind: .run, window: window, mode: mode)))
                        // Run directly, not in a ServiceGroup of its own: three groups in turn would
                        // trap SIGINT three times, and leave it trapped, unanswered, between steps.
                        try await service.run()
                        let result = try service.result()
                        let report = RecoveryReport(result)
                        print("\n\(title), window \(report.run.window?.start ?? "") to \(report.run.window?.end ?? ""):")
                        let directory = try ReportFiles.write(report, to: "\(reportDir)/\(name)")
                        print("  \(report.summaryLine)")
                        print("  report: \(directory)/report.html")
                    }
                }
                let summary = try await LedgerSummary.read(database, logger: logger)
                print("""

                    Ledger now: \(summary.notificationsFromWebhook) notifications from the webhook, \(summary.notificationsFromHistory) recovered, \
                    \(summary.subscriptions) subscriptions (\(summary.activeSubscriptions) active), \(summary.runs) runs recorded.
                    """)
            }

            try await VerificationDemo.show()
            print("\nReports: \(reportDir)/dry-run, \(reportDir)/run, \(reportDir)/second-run (report.html to open in a browser, report.md as text, report.json for scripts).")
        }
    }
}
