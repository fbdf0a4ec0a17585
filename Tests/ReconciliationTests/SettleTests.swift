@testable import Decisions
import Foundation
import Ledger
import Reconciliation
import Testing

/// What happens to a decision after its page is written: one pure rule for pass 1 and `ingest`.
@Suite("Settling a decision after the write, without I/O")
struct SettleTests {
    static func planned() throws -> (RecoveryPlanner.PagePlan, RecoveryPlanner.Decision) {
        var memory = RecoveryPlanner.RunMemory()
        let plan = RecoveryPlanner.plan([PlannerTests.notification(PlannerTests.uuidA, signedDate: 5_000)], ledger: .init(), memory: &memory)
        let decision = try #require(plan.decisions.first)
        try #require(decision.action == .applied && plan.batch.subscriptions.count == 1)
        return (plan, decision)
    }

    /// What the database reports; a subscription written only moved its signing time when
    /// `contentChanged` is false, which is applied all the same.
    static func written(inserted: Bool, changedSubscription: Bool, contentChanged: Bool = true) -> LedgerBatchOutcome {
        var outcome = LedgerBatchOutcome()
        if inserted { outcome.insertedNotifications = [UUID(uuidString: PlannerTests.uuidA)!] }
        if changedSubscription { outcome.writtenSubscriptions = ["1000"] }
        if changedSubscription && contentChanged { outcome.changedSubscriptions = ["1000"] }
        return outcome
    }

    @Test func aDryRunsPlanStandsAsPlanned() throws {
        let (plan, decision) = try Self.planned()
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: nil) == .applied)
    }

    @Test func aWriteThatInsertedAndChangedTheSubscriptionIsApplied() throws {
        let (plan, decision) = try Self.planned()
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: Self.written(inserted: true, changedSubscription: true)) == .applied)
    }

    /// A newer notification saying what the row says moves only the signing time: it is the
    /// newest the ledger has, so applied, not stale (the change feed just has nothing to say).
    @Test func aWriteThatMovedOnlyTheSigningTimeIsAppliedNotStale() throws {
        let (plan, decision) = try Self.planned()
        let written = Self.written(inserted: true, changedSubscription: true, contentChanged: false)
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: written) == .applied)
    }

    @Test func aNotificationRecordedMeanwhileByAnotherWriterIsAlreadyRecorded() throws {
        let (plan, decision) = try Self.planned()
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: Self.written(inserted: false, changedSubscription: true)) == .alreadyRecorded)
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: Self.written(inserted: false, changedSubscription: false)) == .alreadyRecorded)
    }

    @Test func anApplicationANewerWriteOvertookIsStale() throws {
        let (plan, decision) = try Self.planned()
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: Self.written(inserted: true, changedSubscription: false)) == .stale)
    }

    @Test func withoutASubscriptionRowToChangeAnInsertedNotificationIsApplied() throws {
        var (plan, decision) = try Self.planned()
        plan.batch.subscriptions = []
        #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: Self.written(inserted: true, changedSubscription: false)) == .applied)
    }

    @Test func rejectedAndAlreadyRecordedDecisionsAreNotChangedByTheWrite() throws {
        let (plan, planned) = try Self.planned()
        var decision = planned
        for action in [RecoveryPlanner.Action.rejected, .alreadyRecorded, .retryLater] {
            decision.action = action
            #expect(RecoveryPlanner.settle(decision, batch: plan.batch, written: Self.written(inserted: false, changedSubscription: false)) == action)
        }
    }
}
