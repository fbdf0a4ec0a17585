import AppStoreServerAPI
import ArgumentParser
import Foundation
import Ledger
import Logging
import Reconciliation
import SignedData

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check configuration and credentials end to end, one line per check.",
        discussion: """
            Checks that the root certificates and the private key load, that Apple accepts the JWT (Request a \
            Test Notification), that Apple can reach the server's webhook (Get Test Notification Status: the \
            send attempt's result), and that the database is reachable and migrated. Exit code 0 only if every \
            check passes, 78 otherwise.
            """
    )

    @Option(help: "Seconds to wait for Apple to report the test notification's delivery.")
    var webhookTimeout = 30.0

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        try await withExitStatus {
            var failures = 0
            func report(_ passed: Bool, _ line: String) {
                print("\(passed ? "ok  " : "FAIL") \(line)")
                if !passed { failures += 1 }
            }
            let logger = Logger(label: "appstore-reconcile.check")
            var pairs: [ConfigurationOptions.Pair] = []
            do {
                pairs = try options.pairs()
            } catch {
                report(false, "configuration: \(error)")
            }
            for pair in pairs {
                let settings = pair.settings
                let name = pairs.count > 1 ? "\(pair.pair): " : ""
                do {
                    let verifier = try settings.verifierConfiguration()
                    report(true, "\(name)root certificates: \(verifier.rootCertificates.count) loaded; bundle \(verifier.bundleId), \(verifier.environment)")
                } catch {
                    report(false, "\(name)root certificates / app settings: \(error)")
                }

                var client: AppStoreServerAPIClient?
                do {
                    let configuration = try settings.apiConfiguration(warn: { printError($0, level: .warning) })
                    report(true, "\(name)private key \(configuration.credentials.keyId) loads; API at \(configuration.baseURL)")
                    client = AppStoreServerAPIClient(configuration: configuration, logger: logger)
                } catch {
                    report(false, "\(name)API credentials: \(error)")
                }
                if let client { await checkApple(client, name: name, report: report) }
            }
            let settings = try options.database.settings

            do {
                let url = try settings.databaseURL()
                let applied = try await LedgerDatabase.withClient(url, logger: logger) { database in
                    try await Migrator().applied(database, logger: logger)
                }
                let expected = Migration.bundled.count
                report(applied.count >= expected, "database \(url) reachable; \(applied.count) of \(expected) migrations applied\(applied.count < expected ? ": run `appstore-reconcile migrate`" : "")")
            } catch {
                report(false, "database: \(error)")
            }

            if failures > 0 {
                printError("\(failures) check(s) failed", level: .error)
                throw ExitCode(ExitStatus.configuration)
            }
        }
    }

    /// Apple accepts the credentials and reaches the webhook: Request a Test Notification, then its status.
    private func checkApple(_ client: AppStoreServerAPIClient, name: String, report: (Bool, String) -> Void) async {
        do {
            let token = try await client.requestTestNotification().testNotificationToken
            report(true, "\(name)Apple accepts the credentials (Request a Test Notification answered)")
            let deadline = Date().addingTimeInterval(webhookTimeout)
            var result: String?
            while Date() < deadline {
                let status = try await client.testNotificationStatus(token: token)
                if let attempt = status.sendAttempts?.last {
                    result = attempt.sendAttemptResult.rawValue
                    break
                }
                try await Task.sleep(for: .seconds(2))
            }
            switch result {
            case "SUCCESS"?: report(true, "\(name)Apple reached the webhook with the test notification (SUCCESS)")
            case let other?: report(false, "\(name)Apple could not reach the webhook: \(other)")
            case nil: report(false, "\(name)Apple reported no delivery of the test notification within \(Int(webhookTimeout)) s")
            }
        } catch {
            report(false, "\(name)Apple: \(error)")
        }
    }
}
