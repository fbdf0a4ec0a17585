import ArgumentParser
import Decisions
import Deployment
import Foundation
import Ledger
import LedgerSupport
import Logging
import Reconciliation

struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Drop the stored JWS of old notifications (keeping their rows and each JWS's SHA-256), or old outbox rows.",
        discussion: """
            For teams that do not keep Apple's signed proofs forever. For every notification signed before \
            --signed-older-than ago, drops its stored JWS (app_store.notifications.signed_payload reads NULL \
            from then on) and the transaction and renewal-info JWS nested in it that nothing kept still uses. \
            The row keeps its decoded columns, its signed_payload_key (the SHA-256 of the JWS Apple sent) and \
            signed_payload_pruned_at. Transactions keep their JWS, and so do every newer notification and every \
            notification still to be delivered to your handler.

            What is given up: the proof. A dropped JWS cannot be verified again, delivered again to your \
            handler (`deliver`), or fetched again from Apple once it is older than the 180 days Get \
            Notification History reaches back. Batches of 1,000 notifications, each its own short \
            transaction; running it again goes on where it stopped. --dry-run counts and changes nothing.

            --outbox-older-than deletes the rows of app_store.outbox (the lifecycle events, issue 66) created \
            longer ago than that, in batches of 10,000: Debezium's outbox router ignores deletes, so a stream \
            that read them loses nothing; one that has not yet (a replication slot far behind) still gets them \
            from the WAL its slot holds. Give either option, or both.

            \(ExitStatus.summary)
            """
    )

    @Option(
        name: .customLong("signed-older-than"),
        help: ArgumentHelp("Drop the JWS of notifications signed longer ago than this (400d, 9000h).", valueName: "duration"),
        transform: OutageDetection.durationArgument)
    var signedOlderThan: TimeInterval?

    @Option(
        name: .customLong("outbox-older-than"),
        help: ArgumentHelp("Delete the outbox's lifecycle events created longer ago than this (7d, 168h).", valueName: "duration"),
        transform: OutageDetection.durationArgument)
    var outboxOlderThan: TimeInterval?

    @Flag(help: "Count what would be dropped; change nothing.")
    var dryRun = false

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        guard signedOlderThan != nil || outboxOlderThan != nil else {
            throw ValidationError("give --signed-older-than (such as 400d), --outbox-older-than (such as 7d), or both")
        }
        if let signedOlderThan, signedOlderThan <= 0 { throw ValidationError("--signed-older-than must be a positive duration, such as 400d.") }
        if let outboxOlderThan, outboxOlderThan <= 0 { throw ValidationError("--outbox-older-than must be a positive duration, such as 7d.") }
    }

    func run() async throws {
        try await withExitStatus {
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.prune")
            try await LedgerDatabase.withClient(url, logger: logger) { client in
                if let outboxOlderThan {
                    let pruning = OutboxPruning(createdBefore: Date().addingTimeInterval(-outboxOlderThan))
                    let shown = pruning.createdBefore.formatted(.iso8601)
                    if dryRun {
                        print("Dry run: \(try await pruning.pending(client, logger: logger)) outbox rows created before \(shown) would be deleted.")
                    } else {
                        print("Deleted \(try await pruning.run(client, logger: logger)) outbox rows created before \(shown).")
                    }
                }
                guard let signedOlderThan else { return }
                let before = Date().addingTimeInterval(-signedOlderThan)
                let pruning = SignedPayloadPruning(signedBefore: before)
                let shownBefore = before.formatted(.iso8601)
                if dryRun {
                    let pending = try await pruning.pending(client, logger: logger)
                    print("Dry run: \(pending) notifications signed before \(shownBefore) keep their JWS and would lose it.")
                    return
                }
                let outcome = try await pruning.run(client, logger: logger)
                print("Dropped the stored JWS of \(outcome.pruned) notifications signed before \(shownBefore) (their rows and SHA-256 kept).")
            }
        }
    }
}
