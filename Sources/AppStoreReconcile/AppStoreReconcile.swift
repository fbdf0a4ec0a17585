import ArgumentParser

@main
struct AppStoreReconcile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
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

            \(ExitStatus.summary)
            """,
        subcommands: [RunCommand.self, NightlyCommand.self, ConsumptionRequestsCommand.self, RepairCommand.self, IngestCommand.self, ServeCommand.self, MigrateCommand.self, VerifyCommand.self, DemoCommand.self, ThrowawayPostgresCommand.self, SimulateCommand.self, StatusCommand.self, ChangesCommand.self, DeliverCommand.self, CheckCommand.self, DetectOutageCommand.self]
    )
}
