import ArgumentParser

/// `appstore-reconcile-dev`: the tool's companions for trying it and for its tests, kept out of
/// the binary teams deploy: `demo` (the tool at work on embedded defaults), `simulate` (the App
/// Store simulator with its test PKI) and `throwaway-postgres` (a private cluster).
@main
struct AppStoreReconcileDev: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appstore-reconcile-dev",
        abstract: "Try appstore-reconcile without Apple or a database of your own: a demo, the App Store simulator, a throwaway PostgreSQL.",
        discussion: """
            Not for production: this binary carries a test PKI and the simulator. The tool itself is \
            appstore-reconcile.
            """,
        subcommands: [DemoCommand.self, SimulateCommand.self, ThrowawayPostgresCommand.self]
    )
}
