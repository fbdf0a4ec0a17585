import ArgumentParser
import FailureKind
import Foundation
import Ledger
import Logging

/// Writes a message for the operator to standard error: the line itself with text logs, or a
/// JSON object at `level` with JSON logs, so that a log shipper reads every line.
func printError(_ line: String, level: Logger.Level = .notice) {
    guard LoggingSetup.format == .json else {
        FileHandle.standardError.write(Data((line + "\n").utf8))
        return
    }
    JSONLineLogHandler.write(level: level.rawValue, label: "appstore-reconcile", message: line, metadata: [:])
}

/// A failure as the operator reads it: its kind (which decides the exit status) and one line.
/// This is the one place that words the failures every command shares. Messages never include
/// secrets: configuration errors name the setting, database errors the server's message, not
/// the URL's password.
struct FailureReport: Sendable, Hashable {
    var kind: FailureKind
    var line: String

    init(kind: FailureKind, line: String) {
        self.kind = kind
        self.line = line
    }

    init(_ error: any Error) {
        switch error {
        case let failure as any KindedFailure:
            self.init(kind: failure.failureKind, description: failure.description, advice: failure.advice)
        case is CancellationError:
            self.init(kind: .temporary, line: "interrupted")
        default:
            if let failure = LedgerFailure(error) {
                self.init(failure)
            } else {
                self.init(kind: .unexpected, description: "\(error)", advice: nil)
            }
        }
    }

    init(kind: FailureKind, description: String, advice: String?) {
        let prefix =
            switch kind {
            case .configuration: "configuration error"
            case .interrupted: "interrupted"
            case .rejected: "rejected"
            case .usage, .temporary, .unexpected: "error"
            }
        self.init(kind: kind, line: "\(prefix): \(description)" + (advice.map { ". \($0)" } ?? ""))
    }

    var level: Logger.Level { kind == .interrupted ? .notice : .error }
}

/// Runs a command's body and turns the failures every command shares into a clear one-line
/// message (`FailureReport`) and the documented exit code (`ExitStatus.of`).
package func withExitStatus(logFormat: LogFormat? = nil, job: Bool = false, _ body: () async throws -> Void) async throws {
    LoggingSetup.bootstrap(logFormat, job: job)
    disableCoreDumps()
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        let report = FailureReport(error)
        printError(report.line, level: report.level)
        throw ExitCode(ExitStatus.of(report.kind))
    }
}

/// No core file of this process: its memory holds the API key, the database password and
/// payloads. (The jobs' units say `LimitCORE=0` too; this holds wherever it runs.)
func disableCoreDumps() {
    var none = rlimit(rlim_cur: 0, rlim_max: 0)
    _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &none)
}
