import ArgumentParser
import Foundation
import Logging
import ReconcileCLI
import UnixSignals
import ThrowawayPostgres

#if canImport(Glibc)
import Glibc
#endif

struct ThrowawayPostgresCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "throwaway-postgres",
        abstract: "Start a private PostgreSQL cluster for trying the tool, until Ctrl-C.",
        discussion: """
            Starts a cluster from the installed PostgreSQL server binaries in a temporary directory, reachable \
            only through a Unix socket in that directory, and prints its DATABASE_URL. Runs until SIGINT or \
            SIGTERM, then stops the server and deletes the directory; if this process is killed outright, a \
            watchdog does the same within a second or two. When run as root, the server runs as the postgres \
            user (PostgreSQL refuses to run as root). Not for real data: durability settings are off.
            """
    )

    func run() async throws {
        try await withExitStatus {
            let cluster = try ThrowawayPostgres.start()
            defer { cluster.stop() }
            print("DATABASE_URL=\(cluster.url())")
            print("directory: \(cluster.directory)")
            print("Press Ctrl-C to stop and delete it.")
            fflush(nil)
            await waitForTerminationSignal()
        }
    }
}

/// Suspends until SIGINT or SIGTERM arrives (trapped: they no longer end the process at once).
func waitForTerminationSignal() async {
    for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { return }
}
