package import FailureKind
import LedgerModel

// What each of the ledger's failures asks of the operator (see FailureKind).

extension LedgerFailure: KindedFailure {
    package var failureKind: FailureKind {
        switch kind {
        case .schemaMissing, .credentialsRefused: .configuration
        case .temporary: .temporary
        case .refusedInput, .other: .unexpected
        }
    }

    package var advice: String? {
        switch kind {
        case .schemaMissing: "The ledger schema is missing in this database: run `appstore-reconcile migrate` first."
        case .credentialsRefused: "The database refused the credentials in DATABASE_URL."
        case .temporary, .refusedInput, .other: "The database failed; everything committed stays: run again when the database is back."
        }
    }
}

extension RunLockLost: KindedFailure {
    package var failureKind: FailureKind { .temporary }
    package var advice: String? { "Everything committed stays; run again when the database is back." }
}

extension RunInProgress: KindedFailure {
    package var failureKind: FailureKind { .temporary }
    package var advice: String? { "It stops by itself; try again after it." }
}

extension DeliveryInProgress: KindedFailure {
    package var failureKind: FailureKind { .temporary }
    package var advice: String? { "Try again after it." }
}

extension MigrationRefused: KindedFailure {
    package var failureKind: FailureKind { .unexpected }
}

/// A facts file that cannot be used, found when the run checks it: fix it (exit 78). A facts
/// query that fails for one request is that request's outcome, never thrown this far.
extension RefundFactsError: KindedFailure {
    package var failureKind: FailureKind { .configuration }
    package var advice: String? { "Nothing was sent to Apple. Fix the file, then try it with `appstore-reconcile check`." }
}
