import AppStoreServerAPI
import ArgumentParser
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import ThrowawayPostgres

/// Writes a message for the operator to standard error: the line itself with text logs, or a
/// JSON object (level from its prefix) with JSON logs, so that a log shipper reads every line.
func printError(_ line: String) {
    guard LoggingSetup.format == .json else {
        FileHandle.standardError.write(Data((line + "\n").utf8))
        return
    }
    let level = line.hasPrefix("warning") ? "warning" : line.hasPrefix("error") || line.contains(" error: ") || line.hasPrefix("configuration error") || line.hasPrefix("database error") ? "error" : "notice"
    JSONLineLogHandler.write(level: level, label: "appstore-reconcile", message: line, metadata: [:])
}

/// Runs a command's body and turns the failures every command shares into a clear one-line
/// message and the documented exit code. Messages never include secrets: configuration errors
/// name the setting, database errors the server's message, not the URL's password.
func withExitStatus(logFormat: LogFormat? = nil, job: Bool = false, _ body: () async throws -> Void) async throws {
    LoggingSetup.bootstrap(logFormat, job: job)
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch let error as ConfigurationError {
        printError("configuration error: \(error)")
        throw ExitCode(ExitStatus.configuration)
    } catch let error as MigrationRefused {
        printError("error: \(error)")
        throw ExitCode(ExitStatus.failure)
    } catch let error as RunStopped {
        printError("interrupted: \(error). Run the same command again to finish; what is recorded is skipped.")
        throw ExitCode(ExitStatus.interrupted)
    } catch let error as RunLockLost {
        printError("error: \(error). Everything committed stays; run again when the database is back.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as RunInProgress {
        printError("error: \(error). It stops by itself; try again after it.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as AppStoreAPIError {
        printError("error: \(error)")
        throw ExitCode(error.isCredentialsProblem ? ExitStatus.configuration : ExitStatus.failure)
    } catch let error as RetriesExhausted {
        printError("error: Apple's API is unavailable: \(error). Nothing applied was lost (each page is committed); run again later.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as AppStoreTransportError {
        printError("error: \(error)")
        throw ExitCode(error.isRetryable ? ExitStatus.temporaryFailure : ExitStatus.failure)
    } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" || error.serverInfo?[.sqlState] == "3F000" {
        printError("configuration error: the ledger schema is missing in this database: run `appstore-reconcile migrate` first (\(describe(error)))")
        throw ExitCode(ExitStatus.configuration)
    } catch let error as PSQLError where ["28P01", "28000"].contains(error.serverInfo?[.sqlState] ?? "") {
        printError("configuration error: the database refused the credentials in DATABASE_URL (\(describe(error)))")
        throw ExitCode(ExitStatus.configuration)
    } catch let error as PSQLError {
        printError("database error: \(describe(error)). Everything committed stays; run again when the database is back.")
        throw ExitCode(isTemporary(error) ? ExitStatus.temporaryFailure : ExitStatus.failure)
    } catch let error as ThrowawayPostgresError {
        printError("error: \(error)")
        throw ExitCode(ExitStatus.failure)
    } catch is CancellationError {
        printError("interrupted")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch {
        printError("error: \(error)")
        throw ExitCode(ExitStatus.failure)
    }
}

/// A PostgreSQL error in one line: the server's own message when there is one.
/// Whether a database error is the kind that passes: the connection lost or refused, the server
/// shutting down or restarting (class 57: also a statement timeout or a cancel), out of resources
/// (53), a serialization failure or deadlock (40001, 40P01), a connection failure (08).
func isTemporary(_ error: PSQLError) -> Bool {
    if [.connectionError, .serverClosedConnection, .uncleanShutdown].contains(error.code) { return true }
    guard let state = error.serverInfo?[.sqlState] else { return false }
    return state.hasPrefix("57") || state.hasPrefix("53") || state.hasPrefix("08") || state == "40001" || state == "40P01"
}

func describe(_ error: PSQLError) -> String {
    if let message = error.serverInfo?[.message] {
        let code = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
        return message + code
    }
    if error.code == .connectionError {
        let underlying = error.underlying.map { ": \($0)" } ?? ""
        return "cannot connect to the database\(underlying)"
    }
    return "\(error.code)"
}
