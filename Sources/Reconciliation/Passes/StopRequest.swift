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

/// The run stopped because it was asked to; everything committed before stays, and running the
/// same window again finishes the work (what is already recorded is skipped).
package struct RunStopped: Error, CustomStringConvertible, Sendable {
    /// What the run had counted when it stopped, once a pass has added them.
    package var counts: RecoveryReport.Counts?
    package init(counts: RecoveryReport.Counts? = nil) { self.counts = counts }
    package var description: String { "stopped on request after committing the batch in hand" }
}
