import Synchronization

/// Asks a long run to stop at the next safe point: between pages in pass 1, between customers
/// in pass 2, after the batch in hand is committed. Set from a signal handler (SIGTERM from
/// cron, systemd or Kubernetes; SIGINT from a terminal).
package final class StopRequest: Sendable {
    private let requested = Atomic<Bool>(false)

    package init() {}

    package func request() { requested.store(true, ordering: .relaxed) }

    package var isRequested: Bool { requested.load(ordering: .relaxed) }

    /// Throws `RunStopped` when a stop was asked for.
    package func check() throws {
        if isRequested { throw RunStopped() }
    }
}

/// Thrown at a safe point when a stop was asked for: everything committed before stays, and
/// running the same window again finishes the work (what is already recorded is skipped). The
/// passes catch it and return what they did (`RunResult.Ending.stopped`); the commands that
/// have no result (`deliver`, `ingest`) let it reach the CLI.
package struct RunStopped: Error, CustomStringConvertible, Sendable {
    package init() {}
    package var description: String { "stopped on request after committing the batch in hand" }
}
