import Decisions
import Foundation
import SignedData

extension RecoveryReport {
    /// The report of a run: a rendering of its result, nothing decided here.
    package init(_ result: RunResult) {
        let one = result.passOne
        let two = result.passTwo
        self.init(
            run: Run(
                id: result.id.uuidString.lowercased(), mode: result.mode, environment: result.environment.rawValue, bundleId: result.bundleId,
                window: one.map { Window(start: ReportTimeline.iso($0.window.start), end: ReportTimeline.iso($0.window.end)) },
                startedAt: ReportTimeline.iso(result.startedAt), finishedAt: ReportTimeline.iso(result.finishedAt),
                plan: one.map { one in
                    Plan(
                        priorityQueries: one.plan.priorityQueries.map(\.description), remainder: one.plan.onlyTypes == nil ? "unfiltered" : "none",
                        remainderQueries: one.plan.queries.count - one.plan.priorityQueries.count, onlyFailures: one.plan.onlyFailures
                    )
                },
                shard: result.shard.isWhole ? nil : result.shard.description, resumed: one?.resumed,
                passOneSeconds: one.map { Self.seconds(from: $0.startedAt, to: $0.finishedAt) },
                passTwoSeconds: two.map { Self.seconds(from: $0.startedAt, to: $0.finishedAt) }
            ),
            counts: result.counts, missed: one?.missed ?? ReportList([]), rejected: one?.rejected ?? ReportList([]),
            customers: one?.customers ?? ReportList([]),
            deliveryFailures: one?.deliveryFailures ?? DeliveryFailures(byFirstAttemptResult: [:], byHourOfFirstAttempt: [:]),
            timeline: one?.timeline, repairs: two?.repairs ?? ReportList([]), redelivery: result.redelivery
        )
        answers = result.answers?.answers
        imported = result.imported
        compensation = result.compensated
        audit = result.audited
        outcome = result.outcome
        problems = result.problems
    }


    /// Seconds, to the millisecond.
    static func seconds(from start: Date, to end: Date) -> Double { (end.timeIntervalSince(start) * 1000).rounded() / 1000 }
}
