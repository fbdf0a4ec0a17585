import AppStoreServerAPI
import Deployment
@testable import Decisions
import FailureKind
import Foundation
@testable import Ledger
import Logging
import Reconciliation
@testable import ReconcileCLI
import Testing

/// Every command's failures are worded in one place and mapped to their exit status through one
/// table, from the kind each library's error carries; no I/O.
@Suite struct FailureReportTests {
    struct Unforeseen: Error, CustomStringConvertible { var description: String { "something unforeseen" } }

    @Test func eachKindHasItsDocumentedExitStatus() {
        let expected: [FailureKind: Int32] = [.usage: 64, .configuration: 78, .rejected: 65, .temporary: 75, .interrupted: 130, .unexpected: 1]
        for kind in FailureKind.allCases {
            #expect(ExitStatus.of(kind) == expected[kind], "\(kind)")
            #expect(ExitStatus.summary.contains("\(ExitStatus.of(kind)) "), "the documented summary names \(kind)'s status")
        }
    }

    @Test func eachLibrarysErrorsCarryTheirKindAndAreWordedForTheOperator() {
        let cases: [(any Error, FailureKind, String)] = [
            (ConfigurationError(setting: "DATABASE_URL", problem: "is not set"), .configuration, "configuration error: "),
            (WindowError("'x' is not a time"), .usage, "error: 'x' is not a time"),
            (RunLockLost(underlying: "gone"), .temporary, "run again when the database is back"),
            (RunInProgress(holder: nil), .temporary, "It stops by itself; try again after it."),
            (RateLimitedUntil(endpoint: .notificationHistory, resumeAt: Date(timeIntervalSince1970: 0), bound: .seconds(60)), .temporary,
             "run the same command again after 1970-01-01T00:00:00Z to resume"),
            (AppStoreAPIError(endpoint: .notificationHistory, httpStatus: 401, code: nil, message: nil), .configuration, "configuration error: "),
            (AppStoreAPIError(endpoint: .notificationHistory, httpStatus: 400, code: nil, message: nil), .unexpected, "error: "),
            (AppStoreTransportError(endpoint: .transactionHistory, description: "reset", isRetryable: true), .temporary, "error: "),
            (MigrationRefused(reason: "edited"), .unexpected, "error: migration refused: edited"),
            (CancellationError(), .temporary, "interrupted"),
            (Unforeseen(), .unexpected, "error: something unforeseen"),
        ]
        for (error, kind, words) in cases {
            let report = FailureReport(error)
            #expect(report.kind == kind, "\(type(of: error))")
            #expect(report.line.contains(words), "\(type(of: error)): \(report.line)")
        }
    }

    @Test func aStopIsWordedAsTheRunSaysIt() {
        let report = FailureReport(RunStopped())
        #expect(ExitStatus.of(report.kind) == 130)
        #expect(report.line == "interrupted: stopped on request after committing the batch in hand. Run the same command again to finish: nothing committed is lost or written twice.")
        #expect(report.level == .notice)
        #expect(FailureReport(Unforeseen()).level == .error)
    }
}
