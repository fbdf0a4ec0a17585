import ArgumentParser
import ReconcileCLI

/// appstore-reconcile, the binary teams deploy: its commands are ReconcileCLI's.
@main
enum AppStoreReconcile {
    static func main() async {
        // Inside an async function the async `main()` is chosen: the synchronous one refuses an
        // asynchronous root command.
        await ReconcileCommand.main()
    }
}
