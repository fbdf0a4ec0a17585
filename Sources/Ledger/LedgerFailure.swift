import PostgresNIO

/// A database error, classified by what the operator should do about it, so that callers act
/// on the kind and never on SQLSTATEs. Read from PostgresNIO's `PSQLError`.
package struct LedgerFailure: Error, CustomStringConvertible, Sendable {
    package enum Kind: Sendable, Hashable {
        /// The ledger's schema is missing in this database: `migrate` first.
        case schemaMissing
        /// The server refused the credentials.
        case credentialsRefused
        /// It passes: the connection lost or refused, the server shutting down or restarting
        /// (class 57: also a statement timeout or a cancel), out of resources (53), a
        /// serialization failure or deadlock (40001, 40P01), a connection failure (08), a lock
        /// not had within `lock_timeout` (55P03).
        case temporary
        /// The server refused what was sent (a data exception, class 22, or an integrity
        /// violation, class 23): sent again, it fails again; sent without it, the rest may pass.
        case refusedInput
        /// Anything else.
        case other
    }

    package var kind: Kind
    /// The server's own message and SQLSTATE when there is one; never the URL or its password.
    package var description: String

    /// The classification of `error`, or nil when it is not a database error. A write in a
    /// transaction fails with PostgresNIO's `PostgresTransactionError` around the database's
    /// error (of BEGIN, of a statement, of COMMIT): that error is the one classified.
    package init?(_ error: any Error) {
        let found: PSQLError?
        if let error = error as? PSQLError {
            found = error
        } else if let transaction = error as? PostgresTransactionError {
            found = [transaction.beginError, transaction.closureError, transaction.commitError].lazy.compactMap { $0 as? PSQLError }.first
        } else {
            found = nil
        }
        guard let error = found else { return nil }
        let state = error.serverInfo?[.sqlState]
        if state == "42P01" || state == "3F000" {
            kind = .schemaMissing
        } else if state == "28P01" || state == "28000" {
            kind = .credentialsRefused
        } else if [.connectionError, .serverClosedConnection, .uncleanShutdown].contains(error.code) {
            kind = .temporary
        } else if let state, state.hasPrefix("57") || state.hasPrefix("53") || state.hasPrefix("08") || state == "40001" || state == "40P01" || state == "55P03" {
            kind = .temporary
        } else if let state, state.hasPrefix("22") || state.hasPrefix("23") {
            kind = .refusedInput
        } else {
            kind = .other
        }
        if let message = error.serverInfo?[.message] {
            description = message + (state.map { " (SQLSTATE \($0))" } ?? "")
        } else if error.code == .connectionError {
            description = "cannot connect to the database" + (error.underlying.map { ": \($0)" } ?? "")
        } else {
            description = "\(error.code)"
        }
    }
}
