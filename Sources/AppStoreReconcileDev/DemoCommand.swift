import AppStoreServerAPI
import AppStoreSimulator
import ArgumentParser
import Deployment
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
            ledger; starts the App Store simulator for two apps, each in Production (--customers customers) and \
            Sandbox (a quarter of them), over a week with an outage of several hours; fills the ledger with what \
            the live servers received; writes one configuration file of both apps in both environments; shows what \
            Apple owes (status: the subscriptions whose next notification is overdue, found without naming the outage); \
            then runs appstore-reconcile run --config on it three times: a dry run (writes nothing, writes reports), \
            the real run, and a second run that must apply nothing; shows what Apple owes again; then answers the refund requests the outage \
            hid (consumption-requests --answer, from a table of usage the demo makes up) and checks again, which \
            must send nothing; then lists, in a dry run of compensate, the subscribers the outage locked out and the \
            renewal-date extension each would get. Prints where the reports are. DATABASE_URL is ignored so that the demo never touches a real ledger; pass \
            --database-url to use a server of your own.
            """
    )

    @Option(name: .customLong("database-url"), help: "Use this PostgreSQL server instead of a throwaway cluster.")
    var databaseURL: String?

    @Option(help: "Customers of each app in Production (a quarter of them in Sandbox).")
    var customers = 1000

    @Option(help: "Where to write the three runs' reports.")
    var reportDir = "appstore-reconcile-demo"

    /// The demo's database, and its URL as given (or as the cluster says) for the tool's
    /// DATABASE_URL: the one --database-url names, or a throwaway cluster the caller stops.
    private func openDatabase(logger: Logger) throws -> (ThrowawayPostgres?, DatabaseURL, String) {
        if let databaseURL {
            let url = try Settings(flags: [.databaseURL: databaseURL], environment: [:]).databaseURL()
            print("Using the database at \(url).")
            return (nil, url, databaseURL)
        }
        print("Starting a throwaway PostgreSQL cluster…")
        let started = try ThrowawayPostgres.start(logger: logger)
        do {
            let text = try started.url()
            let url = try DatabaseURL(text)
            print("  running in \(started.directory) (removed when the demo ends)")
            return (started, url, text)
        } catch {
            started.stop()
            throw error
        }
    }

    /// The dry run, the real run and a second run of the outage's window, as a user types them.
    private func showRuns(config: String, start: String, end: String, databaseURL: String) async throws {
        for (name, extra, title) in [
            ("dry-run", ["--dry-run"], "Dry run (writes nothing)"), ("run", [], "The real run"),
            ("second-run", [], "A second run, which must apply nothing"),
        ] {
            let arguments = ["run", "--config", config, "--start", start, "--end", end, "--report-dir", "\(reportDir)/\(name)", "--no-progress"] + extra
            print("\n\(title), every App Store side by side:\n  $ appstore-reconcile \(arguments.joined(separator: " "))")
            let status = try await DemoDeployment.runTool(arguments, databaseURL: databaseURL)
            // 3: done, with payloads rejected (none here, but it is a success).
            guard status == 0 || status == 3 else { throw DemoFailure("appstore-reconcile run exited \(status)") }
        }
    }

    func run() async throws {
        try await withExitStatus {
            let logger: Logger = {
                var logger = Logger(label: "appstore-reconcile.demo")
                logger.logLevel = .warning
                return logger
            }()
            let (cluster, url, urlText) = try openDatabase(logger: logger)
            defer { cluster?.stop() }

            let world = try DemoDeployment.world(customers: customers)
            let planted = try DemoRefundAnswers.plant(in: world)
            print("Simulating the App Store of two apps, each in Production and Sandbox: a week of history, an outage of 6 hours:")
            DemoDeployment.describe(world).forEach { print($0) }

            try await LedgerDatabase.withClient(url, logger: logger) { database in
                let outcome = try await Migrator().migrate(database, logger: logger)
                print("Created the ledger schema: \(outcome.applied.isEmpty ? "already up to date" : outcome.applied.joined(separator: ", ")).")
                print("Filling the ledger with the notifications each App Store's live server received…")
                try await DemoDeployment.fill(world, store: LedgerStore(client: database, logger: logger))

                try await world.withRunning(logger: logger) { production, sandbox in
                    let files = try SimulatorFiles.write(for: world.worlds[0], in: "\(reportDir)/deployment")
                    let config = "\(reportDir)/deployment/appstore.yaml"
                    let facts = "\(reportDir)/deployment/refund-facts.sql"
                    try DemoRefundAnswers.query.write(toFile: facts, atomically: true, encoding: .utf8)
                    let text = world.configurationFile(files: files, production: production, sandbox: sandbox, refundFacts: facts) + "\n" + DemoMetrics.products(world)
                    try text.write(toFile: config, atomically: true, encoding: .utf8)
                    print("\nOne configuration file for both apps in both environments (the database comes from DATABASE_URL), \(config):")
                    text.split(separator: "\n").forEach { print("    \($0)") }
                    try await DemoOverdue.show(
                        "What Apple owes, from the ledger alone (no outage named): subscriptions whose next notification is overdue.",
                        databaseURL: urlText)
                    let start = Date().addingTimeInterval(-7 * 86_400 - 3600).formatted(.iso8601)
                    let end = Date().formatted(.iso8601)
                    try await DemoMetrics.run("metrics-before", title: "What the ledger is worth before the recovery (MRR, subscriptions, churn, refunds):", config: config, reportDir: reportDir, databaseURL: urlText)
                    try await showRuns(config: config, start: start, end: end, databaseURL: urlText)
                    try await DemoOverdue.show("What Apple owes after the recovery:", databaseURL: urlText)
                    try await DemoRefundAnswers.answer(planted, world: world, config: config, reportDir: reportDir, databaseURL: urlText, database: database, logger: logger)
                    try await DemoCompensation.dryRun(world: world, config: config, reportDir: reportDir, databaseURL: urlText)
                    try await DemoAudit.run(config: config, reportDir: reportDir, databaseURL: urlText)
                    try await DemoMetrics.run("metrics-after", title: "And after it:", config: config, reportDir: reportDir, databaseURL: urlText)
                    try DemoMetrics.compare(reportDir: reportDir)
                }
                let summary = try await LedgerSummary.read(database, logger: logger)
                print("""

                    Ledger now: \(summary.notificationsFromWebhook) notifications from the webhook, \(summary.notificationsFromHistory) recovered, \
                    \(summary.subscriptions) subscriptions (\(summary.activeSubscriptions) active), \(summary.runs) runs recorded; by App Store:
                    """)
                try await DemoDeployment.ledgerByAppStore(database, logger: logger).forEach { print($0) }
                let limited = world.worlds.reduce(0) { $0 + $1.rateLimitedCount }
                let requests = world.worlds.reduce(0) { $0 + $1.requestCounts.values.reduce(0, +) }
                print("Apple's rate limits (50 requests a second in Production, 5 in Sandbox), enforced: \(limited) of \(requests) requests answered 429.")
            }

            try await VerificationDemo.show()
            print(
                "\nReports: \(reportDir)/dry-run, \(reportDir)/run, \(reportDir)/second-run, \(reportDir)/answers, \(reportDir)/compensate, \(reportDir)/audit, \(reportDir)/metrics-before, \(reportDir)/metrics-after: report.html in each links every App Store's own "
                    + "(<bundleId>/<environment>/report.html to open in a browser, report.md as text, report.json for scripts).")
        }
    }
}
