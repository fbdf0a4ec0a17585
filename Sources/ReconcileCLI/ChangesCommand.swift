import ArgumentParser
import Deployment
import Foundation
import Ledger
import Logging
import Reconciliation
import ServiceLifecycle

struct ChangesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "changes",
        abstract: "Print the ledger's change feed (app_store.changes) as JSON lines; --follow waits for new ones.",
        discussion: """
            Every change the tool makes to app_store.subscriptions or app_store.transactions (a live notification \
            through ingest: cause "webhook"; a missed one recovered by pass 1: "history"; a repair by pass 2: \
            "repair") is one row of app_store.changes, written in the same database transaction as the change. \
            This prints those with an id above --after, one JSON object per line, in id order:

              {"id":…,"changed_at":"…Z","environment":…,"original_transaction_id":…,"app_account_token":…,
               "kind":"subscription"|"transaction","before":{…}|null,"after":{…},"cause":…,
               "notification_uuid":…,"run_id":…}

            before and after hold the row's columns, times in UNIX milliseconds (expires_ms …); before is null \
            when the change created the row. Ids are given in commit order: keep the last id you handled and pass \
            it as --after next time, and you miss nothing and see nothing twice.

            --follow keeps printing changes as they commit (it LISTENs on app_store_changes) until SIGINT or \
            SIGTERM, then exits 0. When its database connection ends (a restart, a failover), it connects again \
            (after 0.5 s, doubling up to 30 s while that fails) and goes on after the last change it printed: \
            nothing is missed or printed twice. Needs only DATABASE_URL.

            \(ExitStatus.summary)
            """
    )

    @Option(help: ArgumentHelp("Print the changes with an id above this one (0: from the start).", valueName: "id"))
    var after: Int64 = 0

    @Flag(help: "After printing what is there, wait for new changes and print each as it commits.")
    var follow = false

    @Option(help: ArgumentHelp("Stop after printing this many changes.", valueName: "n"))
    var limit: Int?

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        guard after >= 0 else { throw ValidationError("--after must be 0 or more.") }
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1.") }
    }

    func run() async throws {
        try await withExitStatus {
            let url = try database.settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.changes")
            let (after, limit, follow) = (self.after, self.limit, self.follow)
            let print: @Sendable ([ChangeFeed.Line]) -> Void = { lines in
                for line in lines { Swift.print(line.json) }
                fflush(nil)
            }
            guard follow else {
                _ = try await LedgerDatabase.withClient(url, logger: logger) { client in
                    try await ChangeFeed.stream(client: client, after: after, limit: limit, follow: false, logger: logger, emit: print)
                }
                return
            }
            try await LedgerDatabase.checkReachable(url, logger: logger)
            try await withGracefulShutdown(databaseURL: url, logger: logger) { store, _ in
                do {
                    _ = try await cancelWhenGracefulShutdown {
                        try await ChangeFeed.follow(client: store.client, after: after, limit: limit, logger: logger, emit: print)
                    }
                } catch is CancellationError {
                    // SIGINT or SIGTERM: a normal end of following.
                }
            }
        }
    }
}
