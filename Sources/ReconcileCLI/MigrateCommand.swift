import ArgumentParser
import Deployment
import Ledger
import LedgerSupport
import Logging
import Reconciliation

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or update the ledger schema (app_store) in the database.",
        discussion: """
            Applies the numbered migrations this build carries (the files in sql/) that the database has not \
            applied yet, each in its own transaction, and records each with its checksum in \
            app_store.schema_migrations. Running it again changes nothing. It refuses to run if an applied \
            migration file was edited since. Concurrent runs wait for each other (advisory lock). Rows \
            written before migration 0021 have their signed payloads converted to the compact form, and \
            rows written before 0023 get its columns from their stored payloads, and subscriptions written before 0029 what Apple owes them (due_at, expected), in batches of a fraction \
            of a second each, while the ledger stays in use; an interrupted run resumes there. Only DATABASE_URL is needed.
            """
    )

    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        try await withExitStatus {
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.migrate")
            let (outcome, publication) = try await LedgerDatabase.withClient(url, logger: logger) { client in
                (try await Migrator().migrate(client, logger: logger), try await OutboxPublication.ensure(client, logger: logger))
            }
            if outcome.applied.isEmpty {
                print("The ledger is up to date (\(outcome.alreadyApplied) migrations applied before).")
            } else {
                for name in outcome.applied { print("applied \(name)") }
                print("The ledger is up to date: applied \(outcome.applied.count), \(outcome.alreadyApplied) applied before.")
            }
            if outcome.conversion.batches > 0 {
                let longest = Int(outcome.conversion.longestBatch.components.seconds * 1000)
                    + Int(outcome.conversion.longestBatch.components.attoseconds / 1_000_000_000_000_000)
                print("Stored each signed payload once (migration 0021): \(outcome.conversion.batches) batches, the longest \(longest) ms.")
            }
            if outcome.dueFilled > 0 {
                print("Stored what Apple owes \(outcome.dueFilled) subscriptions written before migration 0029.")
            }
            if let message = publication.message { print(message) }
        }
    }
}
