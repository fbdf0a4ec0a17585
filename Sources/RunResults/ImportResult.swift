package import Decisions
import Foundation

/// What an `import` did with its input: the lines read and what each came to. The accounts it
/// imported are the run's repairs (`PassTwoResult`, reason `imported`).
package struct ImportResult: Sendable {
    package var kind: ImportKind
    /// Hex SHA-256 of the kind and the input's bytes: the key of its checkpoint.
    package var inputSHA256: String
    package var linesTotal: Int
    /// Lines an earlier run of the same input had finished (skipped, not read again).
    package var linesResumedPast = 0
    /// Lines read by this run (blank and `#` lines included).
    package var linesRead = 0
    /// Lines naming an account this import had imported already (not asked about again).
    package var repeats = 0
    /// Accounts asked about (Get All Subscription Statuses and Get Transaction History).
    package var accountsAsked = 0
    /// Look Up Order ID requests made.
    package var orderLookups = 0
    /// Accounts the import's Production pair did not know and the app's Sandbox pair had (App
    /// Review and TestFlight purchases), imported there.
    package var accountsFromSandbox = 0
    /// Lines not imported, with why (garbled, unknown to Apple, an invalid order): a sample, the
    /// first `sampledPerReason` of each reason and `sampledInAll` in all (issue 67: a million junk
    /// lines wrote 143 MB of reports). Every one is counted in `linesNotImported` and
    /// `linesNotImportedByReason`.
    package let problems: ReportList<ImportProblem>
    /// Every line not imported, listed in `problems` or not.
    package private(set) var linesNotImported = 0
    /// Lines not imported per reason; past `countedReasons` distinct reasons, the rest are counted
    /// under `otherReasons`.
    package private(set) var linesNotImportedByReason: [String: Int] = [:]
    /// Lines listed in `problems` of each reason, at most.
    package static let sampledPerReason = 1_000
    /// Lines listed in `problems` in all, at most (reasons can name a code or an error).
    package static let sampledInAll = 10_000
    /// Distinct reasons counted by name, at most.
    package static let countedReasons = 100
    package static let otherReasons = "(other reasons)"
    /// Whether some lines not imported are counted only, not listed in `problems`.
    package var problemsSampled: Bool { problems.count < linesNotImported }
    /// Stopped on request: the next run of the same input goes on from the checkpoint.
    package var stopped = false
    /// The first line of this run not imported: the checkpoint never passes it, so that a run of
    /// the same input reads it again (and reports it again, or imports it once Apple answers).
    package private(set) var firstProblemLine: Int?

    /// Records a line not imported.
    package mutating func add(_ problem: ImportProblem) {
        linesNotImported += 1
        let reason = linesNotImportedByReason[problem.reason] != nil || linesNotImportedByReason.count < Self.countedReasons
            ? problem.reason : Self.otherReasons
        let ofReason = linesNotImportedByReason[reason, default: 0] + 1
        linesNotImportedByReason[reason] = ofReason
        if ofReason <= Self.sampledPerReason, problems.count < Self.sampledInAll { problems.append(problem) }
        firstProblemLine = min(firstProblemLine ?? problem.line, problem.line)
    }

    /// How far the checkpoint may go once every line up to `line` is done: not past a line not imported.
    package func doneThrough(_ line: Int) -> Int {
        firstProblemLine.map { min(line, $0 - 1) } ?? line
    }

    package init(kind: ImportKind, inputSHA256: String, linesTotal: Int) throws {
        self.kind = kind
        self.inputSHA256 = inputSHA256
        self.linesTotal = linesTotal
        self.problems = try ReportList()
    }
}

/// A line an import could not use (report.json's `import.problems[]`).
package struct ImportProblem: Sendable, Codable, Hashable {
    /// 1-based, in the input as given.
    package var line: Int
    /// The line's first characters (never a whole receipt).
    package var value: String
    package var reason: String

    package init(line: Int, value: String, reason: String) {
        self.line = line
        self.value = value
        self.reason = reason
    }
}
