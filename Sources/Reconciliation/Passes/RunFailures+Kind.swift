package import FailureKind

// What the run's failures ask of the operator (see FailureKind).

extension RunStopped: KindedFailure {
    package var failureKind: FailureKind { .interrupted }
    package var advice: String? { "Run the same command again to finish: nothing committed is lost or written twice." }
}

extension NotATransactionId: KindedFailure {
    package var failureKind: FailureKind { .usage }
}
