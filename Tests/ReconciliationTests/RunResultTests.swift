import AppStoreServerAPI
@testable import Decisions
import Foundation
import Ledger
import Reconciliation
import SignedData
import Testing

/// The run's outcome, its problems and its counts are derived from its result, once, without
/// I/O: these are the values `app_store.runs`, the metrics, the report and the exit status show.
@Suite struct RunResultTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    static func passOne(dryRun: Bool = false, _ counts: (inout RecoveryReport.Counts) -> Void = { _ in }) throws -> PassOneResult {
        let window = try OutageWindow(start: start, end: start.addingTimeInterval(3600), environment: .production, now: start.addingTimeInterval(7200))
        var result = PassOneResult(
            runId: dryRun ? nil : UUID(), dryRun: dryRun, window: window, plan: QueryPlan(window: window, onlyFailures: false), startedAt: start,
            finishedAt: start.addingTimeInterval(2), missed: ReportList([]), rejected: ReportList([]), customers: ReportList([]),
            timeline: ReportTimeline(start: window.start, end: window.end)
        )
        counts(&result.counts)
        return result
    }

    static func passTwo(_ outcomes: [RecoveryReport.Repair.Outcome], rejected: Int = 0) -> PassTwoResult {
        let repairs = outcomes.enumerated().map { index, outcome in
            var repair = RecoveryReport.Repair(originalTransactionId: "\(1000 + index)", reasons: ["named"])
            repair.outcome = outcome
            repair.subscriptionStatusesRequests = 1
            repair.transactionHistoryRequests = 2
            if index == 0 { repair.rejected = rejected }
            return repair
        }
        return PassTwoResult(repairs: ReportList(repairs), startedAt: start, finishedAt: start.addingTimeInterval(1))
    }

    static func result(_ mode: RunMode = .apply, passOne: PassOneResult? = nil, passTwo: PassTwoResult? = nil, ending: RunResult.Ending = .finished) -> RunResult {
        RunResult(
            kind: .run, id: UUID(), mode: mode, environment: .production, startedAt: start, finishedAt: start.addingTimeInterval(3), passOne: passOne,
            passTwo: passTwo, ending: ending
        )
    }

    @Test func aFinishedRunWithNothingToLookAtSucceeded() throws {
        let result = Self.result(passOne: try Self.passOne { $0.missed = 4; $0.applied = 4 }, passTwo: Self.passTwo([.repaired, .unchanged]))
        #expect(result.outcome == .succeeded)
        #expect(!result.problems.any)
    }

    @Test func eachKindOfProblemMakesAFinishedRunSucceedWithRejections() throws {
        let rejected = Self.result(passOne: try Self.passOne { $0.rejected = 1 })
        #expect(rejected.outcome == .succeededWithRejections && rejected.problems.rejected == 1)
        let retryLater = Self.result(passOne: try Self.passOne { $0.retryLater = 2 })
        #expect(retryLater.outcome == .succeededWithRejections && retryLater.problems.retryLater == 2)
        let failedAccount = Self.result(passOne: try Self.passOne(), passTwo: Self.passTwo([.repaired, .failed]))
        #expect(failedAccount.outcome == .succeededWithRejections && failedAccount.problems.customersFailed == 1)
        let rejectedInPassTwo = Self.result(passTwo: Self.passTwo([.unchanged], rejected: 3))
        #expect(rejectedInPassTwo.outcome == .succeededWithRejections && rejectedInPassTwo.problems.rejected == 3)
    }

    @Test func aStoppedRunIsInterruptedWhateverItsProblems() throws {
        let stopped = Self.result(passOne: try Self.passOne { $0.rejected = 5 }, ending: .stopped)
        #expect(stopped.outcome == .interrupted)
        #expect(Self.result(ending: .stopped).outcome == .interrupted)
    }

    @Test func notificationsLeftPendingForTheHandlerAreAProblemOnlyInARealRunThatOwnedTheDelivery() throws {
        var summary = RedeliverySummary(target: "https://handler.example")
        summary.pending = 7
        var real = Self.result(passOne: try Self.passOne())
        real.redelivery = summary
        #expect(real.undelivered == 7 && real.outcome == .succeededWithRejections)
        var dry = Self.result(.dryRun, passOne: try Self.passOne(dryRun: true))
        dry.redelivery = summary
        #expect(dry.undelivered == 0 && dry.outcome == .succeeded, "a dry run lists what it would deliver")
        summary.leftToAnotherDeliverer = true
        real.redelivery = summary
        #expect(real.undelivered == 0 && real.outcome == .succeeded, "another process was delivering: its business")
    }

    @Test func theCountsAddPassTwoAndApplesRateLimitsToPassOnes() throws {
        var api = APIRequestCounts()
        api.rateLimited = 2
        api.rateLimitedByEndpoint = [.transactionHistory: 2]
        var result = Self.result(passOne: try Self.passOne { $0.fetched = 10; $0.rejected = 1; $0.apiRequests = 3 }, passTwo: Self.passTwo([.repaired, .failed, .unchanged], rejected: 2))
        result.api = api
        let counts = result.counts
        #expect(counts.fetched == 10 && counts.apiRequests == 3)
        #expect(counts.customersChecked == 3 && counts.customersRepaired == 1 && counts.customersFailed == 1)
        #expect(counts.subscriptionStatusesRequests == 3 && counts.transactionHistoryRequests == 6)
        #expect(counts.rejected == 3, "pass 1's rejection and pass 2's two")
        #expect(counts.rateLimited == 2 && counts.rateLimitedByEndpoint == [Endpoint.transactionHistory.rawValue: 2])
    }

    @Test func theReportRendersTheResultsOutcomeAndCounts() throws {
        let result = Self.result(passOne: try Self.passOne { $0.rejected = 1 }, passTwo: Self.passTwo([.repaired]))
        let report = RecoveryReport(result)
        #expect(report.outcome == result.outcome && report.hasProblems)
        #expect(report.counts == result.counts)
        #expect(report.run.id == result.id.uuidString.lowercased())
        #expect(report.run.passOneSeconds == 2 && report.run.passTwoSeconds == 1)
        #expect(report.run.window != nil && report.run.plan != nil)
        let repairOnly = RecoveryReport(Self.result(passTwo: Self.passTwo([.unchanged])))
        #expect(repairOnly.run.window == nil && repairOnly.run.plan == nil && repairOnly.timeline == nil, "a repair run has no window")
    }
}
