package import FailureKind

// A setting missing or malformed asks the operator to fix the configuration (exit 78).
extension ConfigurationError: KindedFailure {
    package var failureKind: FailureKind { .configuration }
}
