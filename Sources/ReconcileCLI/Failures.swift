import AppStoreServerAPI
import ArgumentParser
import Decisions
import Foundation
import Ledger
import Reconciliation

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
package func withExitStatus(logFormat: LogFormat? = nil, job: Bool = false, _ body: () async throws -> Void) async throws {
    LoggingSetup.bootstrap(logFormat, job: job)
    disableCoreDumps()
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch let error as ConfigurationError {
        printError("configuration error: \(error)")
        throw ExitCode(ExitStatus.configuration)
    } catch let error as WindowError {
        printError("error: \(error.description)")
        throw ExitCode(ExitStatus.usage)
    } catch let error as NotATransactionId {
        printError("error: --transaction-id \(error.description)")
        throw ExitCode(ExitStatus.usage)
    } catch let error as MigrationRefused {
        printError("error: \(error)")
        throw ExitCode(ExitStatus.failure)
    } catch let error as RunStopped {
        // `deliver` and `ingest`, which return no run result (`conclude` words a run's stop).
        printError("interrupted: \(error). Run the same command again to finish: nothing committed is lost or written twice.")
        throw ExitCode(ExitStatus.interrupted)
    } catch let error as RunLockLost {
        printError("error: \(error). Everything committed stays; run again when the database is back.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as DeliveryInProgress {
        printError("error: \(error). Try again after it.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as RunInProgress {
        printError("error: \(error). It stops by itself; try again after it.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as AppStoreAPIError {
        printError("error: \(error)")
        throw ExitCode(error.isCredentialsProblem ? ExitStatus.configuration : ExitStatus.failure)
    } catch let error as RateLimitedUntil {
        printError(
            "error: \(error). Nothing applied was lost (each page is committed); run the same command again after "
                + "\(error.resumeAt.formatted(.iso8601)) to resume."
        )
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as RetriesExhausted {
        printError("error: Apple's API is unavailable: \(error). Nothing applied was lost (each page is committed); run again later.")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error as AppStoreTransportError {
        printError("error: \(error)")
        throw ExitCode(error.isRetryable ? ExitStatus.temporaryFailure : ExitStatus.failure)
    } catch is CancellationError {
        printError("interrupted")
        throw ExitCode(ExitStatus.temporaryFailure)
    } catch let error {
        guard let failure = LedgerFailure(error) else {
            printError("error: \(error)")
            throw ExitCode(ExitStatus.failure)
        }
        switch failure.kind {
        case .schemaMissing:
            printError("configuration error: the ledger schema is missing in this database: run `appstore-reconcile migrate` first (\(failure))")
            throw ExitCode(ExitStatus.configuration)
        case .credentialsRefused:
            printError("configuration error: the database refused the credentials in DATABASE_URL (\(failure))")
            throw ExitCode(ExitStatus.configuration)
        case .temporary, .refusedInput, .other:
            printError("database error: \(failure). Everything committed stays; run again when the database is back.")
            throw ExitCode(failure.kind == .temporary ? ExitStatus.temporaryFailure : ExitStatus.failure)
        }
    }
}

/// No core file of this process: its memory holds the API key, the database password and
/// payloads. (The jobs' units say `LimitCORE=0` too; this holds wherever it runs.)
func disableCoreDumps() {
    var none = rlimit(rlim_cur: 0, rlim_max: 0)
    _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &none)
}
