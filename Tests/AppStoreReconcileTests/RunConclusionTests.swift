@testable import ReconcileCLI
import Ledger
import Testing

/// Every command that runs one maps the run's outcome to its exit status through one table.
@Suite struct RunConclusionTests {
    @Test func eachOutcomeHasItsDocumentedExitStatus() {
        #expect(ExitStatus.of(.succeeded) == 0)
        #expect(ExitStatus.of(.succeededWithRejections) == 3)
        #expect(ExitStatus.of(.interrupted) == 130)
        #expect(ExitStatus.of(.failed) == 1)
        for outcome in RunOutcome.allCases {
            #expect(ExitStatus.summary.contains("\(ExitStatus.of(outcome)) "), "the documented summary names \(outcome.rawValue)'s status")
        }
    }
}
