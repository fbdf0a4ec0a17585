/// What a failure asks of whoever runs the tool (an operator, cron, systemd, Kubernetes). The
/// command line maps each kind to its exit status in one table (`ExitStatus.of`) and words every
/// failure in one place (`FailureReport`); the libraries only say which kind theirs are.
package enum FailureKind: Sendable, Hashable, CaseIterable {
    /// The command was given wrongly: fix the command line.
    case usage
    /// A setting is missing, malformed or refused: fix the configuration.
    case configuration
    /// What was given to check (a payload) was rejected.
    case rejected
    /// Something needed is unavailable for now (Apple, the database, another run): run again later.
    case temporary
    /// Stopped on request after committing the batch in hand: run again to finish.
    case interrupted
    /// Anything else: a state the tool cannot resolve by itself.
    case unexpected
}

/// An error that says what kind of failure it is, and what the operator can do about it.
package protocol KindedFailure: Error, CustomStringConvertible {
    var failureKind: FailureKind { get }
    /// What to do, said after the description ("run again when the database is back"); nil when
    /// the kind says it all.
    var advice: String? { get }
}

extension KindedFailure {
    package var advice: String? { nil }
}
