import AppStoreServerModel
import Decisions
import Foundation
import LedgerModel
import RemedyDecisions
import Testing

/// The answering pass's order of things for one refund request, without I/O.
@Suite struct RefundAnswerMachineTests {
    static let request = OpenRefundRequest(
        transactionId: "2000", originalTransactionId: "1000", appAccountToken: nil, productId: "coins", productType: "Consumable",
        deadline: Date(timeIntervalSince1970: 1_800_000_000), signedDate: Date(timeIntervalSince1970: 1_799_960_000), rows: 2
    )
    static let delivered = ConsumptionFacts(customerConsented: true, deliveryStatus: "DELIVERED", sampleContentProvided: false, consumptionPercentage: 30_000)

    @Test func anAnswerTheRulesAllowIsTracedBeforeItIsSentAndApplesAnswerIsRecordedOverTheTrace() throws {
        var machine = RefundAnswerMachine(Self.request, dryRun: false)
        #expect(machine.start() == .readFacts)
        guard case .recordThenSend(let trace, let information) = machine.factsRead([Self.delivered]) else {
            Issue.record("the answer is sent after its trace")
            return
        }
        #expect(trace.outcome == "failed" && trace.detail == RefundAnswerMachine.traceDetail && trace.sent?.contains("30000") == true)
        #expect(information.consumptionPercentage == 30_000)
        guard case .recordOverTrace(let row) = machine.sent(.accepted(status: 202)) else {
            Issue.record("Apple's answer is recorded over the trace")
            return
        }
        #expect(row.outcome == "sent" && row.appleStatus == 202)
        #expect(machine.recorded(answered: 2) == .done && machine.isDone)
        #expect(machine.report.outcome == "sent" && machine.report.requestsAnswered == 2 && machine.report.detail == nil)
    }

    @Test func whatIsNotSentIsRecordedAtOnceAndADryRunRecordsNothing() {
        var noFacts = RefundAnswerMachine(Self.request, dryRun: false)
        _ = noFacts.start()
        #expect(noFacts.factsRead([]) == .record(ConsumptionAnswerRecord(transactionId: "2000", outcome: "no_facts")))
        var invalid = RefundAnswerMachine(Self.request, dryRun: false)
        _ = invalid.start()
        guard case .record(let row) = invalid.factsRead([ConsumptionFacts(customerConsented: true, deliveryStatus: "LOST", sampleContentProvided: true)]) else {
            Issue.record("an invalid answer is recorded, not sent")
            return
        }
        #expect(row.outcome == "invalid" && row.sent == nil)
        #expect(row.detail == "delivery_status is 'LOST', not one of DELIVERED, UNDELIVERED_QUALITY_ISSUE, UNDELIVERED_WRONG_ITEM, UNDELIVERED_SERVER_OUTAGE, UNDELIVERED_OTHER")
        var dry = RefundAnswerMachine(Self.request, dryRun: true)
        _ = dry.start()
        #expect(dry.factsRead([Self.delivered]) == .done)
        #expect(dry.report.outcome == RefundAnswerReport.wouldSend && dry.report.sent?.consumptionPercentage == 30_000)
        var failed = RefundAnswerMachine(Self.request, dryRun: false)
        _ = failed.start()
        #expect(failed.factsFailed("ran past its timeout") == .record(ConsumptionAnswerRecord(transactionId: "2000", outcome: "failed", detail: "ran past its timeout")))
    }

    @Test func applesRefusalAnUnknownOutcomeAndARequestNeverSentAreFailedForTheNextCheck() {
        let ends: [(AppleCallEnd, String)] = [
            (.refused(status: 400, code: 4_000_035, message: "Invalid request."), "Apple answered HTTP 400, error 4000035: Invalid request.; sent again at the next check while the deadline is ahead"),
            (.outcomeUnknown(cause: "timed out"), "no answer came (timed out): Apple may have taken it; sent again only once Apple asks again (a new CONSUMPTION_REQUEST)"),
            (AppleCallEnd(.neverSent(reason: "no connection")), "not sent: no connection; sent at the next check while the deadline is ahead"),
            (AppleCallEnd(.answered(status: 500, code: 5_000_001, message: "An unknown error occurred.", retryable: true)),
             "Apple answered HTTP 500, error 5000001 and asked to try again later; sent at the next check while the deadline is ahead"),
        ]
        for (end, detail) in ends {
            var machine = RefundAnswerMachine(Self.request, dryRun: false)
            _ = machine.start()
            _ = machine.factsRead([Self.delivered])
            guard case .recordOverTrace(let row) = machine.sent(end) else {
                Issue.record("recorded over the trace")
                continue
            }
            #expect(row.outcome == "failed" && row.detail == detail, "\(row)")
            #expect(machine.report.needsAPerson)
        }
    }

    @Test func aDryRunAnswersTheLedgersRequestsAndThoseItWouldRecordOncePerTransactionLessTheDecided() {
        let now = Date(timeIntervalSince1970: 1_799_970_000)
        var recorded = Self.request
        recorded.rows = 0
        recorded.deadline = Self.request.deadline.addingTimeInterval(-600)
        var decided = Self.request
        decided.transactionId = "2001"
        var late = Self.request
        late.transactionId = "2002"
        late.deadline = now
        let merged = RefundAnswerMachine.requests(
            open: [Self.request, decided], wouldRecord: [recorded, late], decisions: ["2001": Self.request.signedDate.addingTimeInterval(60)], now: now
        )
        #expect(merged.map(\.transactionId) == ["2000"], "2001 decided after it was asked, 2002's deadline passed")
        #expect(merged.first?.deadline == recorded.deadline && merged.first?.rows == 2)
    }
}

extension RefundAnswerMachineTests {
    /// Issue 62, point 4: Apple takes no answer about a family member's share (4000185) or an
    /// ASSIGNED transaction (4000227): neither is read nor sent, and neither needs a person.
    @Test func familySharingAndAssignedTransactionsAreNotSupportedNotReadNorSent() {
        for (ownership, rule) in [("FAMILY_SHARED", ConsumptionAnswerRules.Unsupported.familyShared), ("ASSIGNED", .assigned)] {
            var request = Self.request
            request.ownershipType = ownership
            for dryRun in [false, true] {
                var machine = RefundAnswerMachine(request, dryRun: dryRun)
                #expect(machine.start() == .done, "\(ownership): nothing read, nothing sent, nothing recorded")
                #expect(machine.report.outcome == "not_supported" && machine.report.detail == rule.detail && !machine.report.needsAPerson)
            }
        }
        var advanced = Self.request
        advanced.ownershipType = "PURCHASED"
        advanced.advancedCommerce = true
        var refusedMachine = RefundAnswerMachine(advanced, dryRun: false)
        #expect(refusedMachine.start() == .done, "an Advanced Commerce purchase: nothing read, nothing sent")
        #expect(refusedMachine.report.outcome == "not_supported" && refusedMachine.report.detail == ConsumptionAnswerRules.Unsupported.advancedCommerce.detail)
        #expect(ConsumptionAnswerRules.unsupported(ownershipType: "FAMILY_SHARED", advancedCommerce: true) == .familyShared)
        #expect(ConsumptionAnswerRules.unsupported(ownershipType: "PURCHASED") == nil)
        #expect(ConsumptionAnswerRules.unsupported(ownershipType: nil) == nil)
        #expect(ConsumptionAnswerRules.Unsupported.familyShared.appleError == 4_000_185 && ConsumptionAnswerRules.Unsupported.assigned.appleError == 4_000_227)
        var purchased = Self.request
        purchased.ownershipType = "PURCHASED"
        var machine = RefundAnswerMachine(purchased, dryRun: false)
        #expect(machine.start() == .readFacts)
    }
}
