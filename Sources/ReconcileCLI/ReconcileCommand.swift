package import ArgumentParser

/// The deployed tool's commands (`appstore-reconcile`). The executable target only calls
/// `main()`; the commands that need the simulator or a throwaway PostgreSQL (`demo`,
/// `simulate`, `throwaway-postgres`) are `appstore-reconcile-dev`'s, so this library and the
/// binary users deploy link neither.
package struct ReconcileCommand: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "appstore-reconcile",
        abstract: "Repairs an App Store subscription ledger in Postgres after missed App Store Server Notifications.",
        discussion: """
            When your server misses App Store Server Notifications V2 (an outage, a bad deploy), customers' \
            records go wrong. This tool pages Apple's Get Notification History for the outage window, \
            verifies every signed payload, and applies to the ledger in Postgres only what was missed.

            Configuration comes from flags or environment variables (flags win): APPSTORE_ISSUER_ID, \
            APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY (path to the .p8 key), APPSTORE_BUNDLE_ID, \
            APPSTORE_APP_APPLE_ID, APPSTORE_ENVIRONMENT (Production or Sandbox), APPSTORE_ROOT_CERTIFICATES \
            (comma-separated DER or PEM files from Apple's certificate authority page), APPSTORE_API_BASE_URL \
            (override of Apple's host, e.g. the simulator), DATABASE_URL.

            To try it without Apple or a database of your own: appstore-reconcile-dev demo, simulate and \
            throwaway-postgres (a second binary, with the App Store simulator and its test PKI).

            \(ExitStatus.summary)
            """,
        subcommands: [RunCommand.self, NightlyCommand.self, ConsumptionRequestsCommand.self, RepairCommand.self, ImportCommand.self, CustomerCommand.self, CompensateCommand.self, AuditCommand.self, IngestCommand.self, ServeCommand.self, MigrateCommand.self, VerifyCommand.self, StatusCommand.self, MetricsCommand.self, ChangesCommand.self, DeliverCommand.self, CheckCommand.self, DetectOutageCommand.self, PruneCommand.self]
    )
}
