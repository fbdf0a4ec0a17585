import AppStoreServerAPI
import ArgumentParser
import Deployment
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
            send attempt's result), that the test notification Apple delivered is in this ledger (the live \
            path records: the Server URL in App Store Connect points to a serve writing this database), and \
            that the database is reachable and migrated, and that each app's refund facts query \
            (refundRequests.facts) parses against it and gives the five columns with their types (it is not \
            run). Exit code 0 only if every check passes, 78 otherwise.
            """
    )

    @Option(help: "Seconds to wait for Apple to report the test notification's delivery, and again for it to appear in the ledger.")
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
            var pairs: [Deployment.Pair] = []
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
                    let made = try pair.apiClient(logger: logger, warn: { printError($0, level: .warning) })
                    report(true, "\(name)private key \(made.configuration.credentials.keyId) loads; API at \(made.configuration.baseURL)")
                    client = made
                } catch {
                    report(false, "\(name)API credentials: \(error)")
                }
                if let client {
                    await checkApple(client, appStore: pair, name: name, database: try? options.database.settings.databaseURL(), report: report)
                }
            }
            let settings = try options.database.settings

            do {
                let url = try settings.databaseURL()
                let applied = try await LedgerDatabase.withClient(url, logger: logger) { database in
                    try await Migrator().applied(database, logger: logger)
                }
                let expected = Migration.bundled.count
                report(applied.count >= expected, "database \(url) reachable; \(applied.count) of \(expected) migrations applied\(applied.count < expected ? ": run `appstore-reconcile migrate`" : "")")
                if applied.count >= expected { try await checkRefundFacts(pairs, url: url, logger: logger, report: report) }
            } catch {
                report(false, "database: \(error)")
            }

            if failures > 0 {
                printError("\(failures) check(s) failed", level: .error)
                throw ExitCode(ExitStatus.configuration)
            }
        }
    }

    /// Each app's facts query parses against the ledger's database and gives the contract's
    /// columns with their types (without running it); one query per app, not per environment.
    private func checkRefundFacts(_ pairs: [Deployment.Pair], url: DatabaseURL, logger: Logger, report: (Bool, String) -> Void) async throws {
        var checked = Set<String>()
        let queries = pairs.compactMap { pair in pair.refundFacts.map { (pair: pair.pair, query: $0) } }.filter { checked.insert($0.pair.bundleId).inserted }
        guard !queries.isEmpty else { return }
        let problems = try await LedgerDatabase.withStore(url, logger: logger) { store in
            var problems: [String?] = []
            for (pair, query) in queries {
                do {
                    try await store.check(query, pair: pair)
                    problems.append(nil)
                } catch let error as RefundFactsError {
                    problems.append(error.description)
                }
            }
            return problems
        }
        for ((pair, query), problem) in zip(queries, problems) {
            report(problem == nil, "\(pair.bundleId): " + (problem ?? "the refund facts query \(query.file) parses and gives the five columns"))
        }
    }

    /// Apple accepts the credentials and reaches the webhook: Request a Test Notification, then its
    /// status; and the notification Apple delivered is in this ledger.
    private func checkApple(
        _ client: AppStoreServerAPIClient, appStore: Deployment.Pair, name: String, database: DatabaseURL?, report: (Bool, String) -> Void
    ) async {
        let pair = appStore.pair
        let token: String
        do {
            token = try await client.requestTestNotification().testNotificationToken
            report(true, "\(name)Apple accepts the credentials (Request a Test Notification answered)")
        } catch let error as AppStoreAPIError where error.isCredentialsProblem {
            report(false, "\(name)Apple: \(error). " + Self.credentialsAdvice(pair.environment))
            return
        } catch {
            report(false, "\(name)Apple: \(error)")
            return
        }
        let deadline = Date().addingTimeInterval(webhookTimeout)
        var result: String?
        var signedPayload: String?
        do {
            while Date() < deadline {
                let status = try await client.testNotificationStatus(token: token)
                if let attempt = status.sendAttempts?.last {
                    result = attempt.sendAttemptResult.rawValue
                    signedPayload = status.signedPayload
                    break
                }
                try await Task.sleep(for: .seconds(2))
            }
        } catch {
            report(false, "\(name)Apple: \(error)")
            return
        }
        switch result {
        case "SUCCESS"?: report(true, "\(name)Apple reached the webhook with the test notification (SUCCESS)")
        case let other?:
            report(false, "\(name)Apple could not reach the webhook: \(other)")
            return
        case nil:
            report(false, "\(name)Apple reported no delivery of the test notification within \(Int(webhookTimeout)) s")
            return
        }
        await checkRecorded(signedPayload, appStore: appStore, name: name, database: database, report: report)
    }

    /// A 200 from *some* server is not the live path working: the TEST notification Apple
    /// delivered must be in this ledger, which only a `serve` writing this database puts there.
    private func checkRecorded(
        _ signedPayload: String?, appStore: Deployment.Pair, name: String, database: DatabaseURL?, report: (Bool, String) -> Void
    ) async {
        let pair = appStore.pair
        let server = "the \(pair.environment.rawValue) Server URL of \(pair.bundleId) in App Store Connect"
        guard let signedPayload, let verifier = try? appStore.verifier() else {
            report(false, "\(name)Apple's test notification could not be read to look it up in the ledger")
            return
        }
        guard let notification = await verifier.verifyNotification(signedPayload).verifiedPayload,
            let uuid = UUID(uuidString: notification.payload.notificationUUID)
        else {
            report(false, "\(name)Apple's test notification did not verify, so it was not looked up in the ledger")
            return
        }
        guard let database else {
            report(false, "\(name)the test notification \(uuid.uuidString.lowercased()) was not looked up: no database configured")
            return
        }
        let logger = Logger(label: "appstore-reconcile.check")
        let wait = webhookTimeout
        do {
            let found = try await LedgerDatabase.withStore(database, logger: logger) { store in
                let deadline = Date().addingTimeInterval(wait)
                repeat {
                    if try await store.holdsNotification(uuid) { return true }
                    try await Task.sleep(for: .seconds(1))
                } while Date() < deadline
                return false
            }
            if found {
                report(true, "\(name)the test notification \(uuid.uuidString.lowercased()) is in the ledger: the live path records")
            } else {
                report(
                    false,
                    "\(name)Apple delivered the test notification \(uuid.uuidString.lowercased()) (SUCCESS), but it is not in this ledger after \(Int(wait)) s: "
                        + "\(server) points to a server that does not record into this database (another deployment, an old server)"
                )
            }
        } catch {
            report(false, "\(name)the test notification \(uuid.uuidString.lowercased()) could not be looked up in the ledger: \(error)")
        }
    }

    /// What a 401 can mean: wrong credentials, or, in Production, an app never released.
    static func credentialsAdvice(_ environment: AppStoreEnvironment) -> String {
        let check = "Check the key file, key ID, issuer ID and bundle ID"
        guard environment == .production else { return check + "." }
        return check + "; Apple also answers 401 in Production to an app that has never had a release (Production's endpoints open with "
            + "the first release; Apple's developer forums, thread 742923): use Sandbox until then."
    }
}
