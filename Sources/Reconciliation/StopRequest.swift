import Synchronization

/// Asks a long run to stop at the next safe point: between pages in pass 1, between customers
/// in pass 2, after the batch in hand is committed. Set from a signal handler (SIGTERM from
/// cron, systemd or Kubernetes; SIGINT from a terminal).
public final class StopRequest: Sendable {
    private let requested = Atomic<Bool>(false)

    public init() {}

    public func request() { requested.store(true, ordering: .relaxed) }

    public var isRequested: Bool { requested.load(ordering: .relaxed) }

    /// Throws `RunStopped` when a stop was asked for.
    public func check() throws {
        if isRequested { throw RunStopped() }
    }
}

/// The run stopped because it was asked to; everything committed before stays, and running the
/// same window again finishes the work (what is already recorded is skipped).
public struct RunStopped: Error, CustomStringConvertible, Sendable {
    /// What the run had counted when it stopped, once a pass has added them.
    public var counts: RecoveryReport.Counts?
    public init(counts: RecoveryReport.Counts? = nil) { self.counts = counts }
    public var description: String { "stopped on request after committing the batch in hand" }
}
