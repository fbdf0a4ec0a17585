import Foundation
import LedgerModel
import SignedData
import Testing

@testable import Decisions

@Suite("Pass 2 by evidence, without I/O")
struct RecoveryEvidenceTests {
    func at(_ seconds: TimeInterval) -> Date { Date(timeIntervalSince1970: 1_800_000_000 + seconds) }

    @Test func aSubscriptionsRecoveredNotificationsDetermineItsRowsExceptAnUndecidedRefundRequest() {
        for type in NotificationType.documented where type != .consumptionRequest {
            let recorded = [RecoveredNotification(type: type.rawValue, signedDate: at(0))]
            #expect(RecoveryEvidence.question(recorded, oneTimePurchase: false) == nil, "\(type.rawValue)")
        }
        let request = RecoveredNotification(type: "CONSUMPTION_REQUEST", signedDate: at(0))
        #expect(RecoveryEvidence.question([request], oneTimePurchase: false) == .init(needsTransactionHistory: true))
    }

    @Test func aRefundRequestIsDecidedOnlyByADecisionSignedAfterIt() {
        let request = RecoveredNotification(type: "CONSUMPTION_REQUEST", signedDate: at(100))
        for decision in ["REFUND", "REFUND_DECLINED"] {
            let later = RecoveredNotification(type: decision, signedDate: at(200))
            #expect(RecoveryEvidence.question([request, later], oneTimePurchase: false) == nil, "recovered with its \(decision)")
            let earlier = RecoveredNotification(type: decision, signedDate: at(50))
            #expect(RecoveryEvidence.question([earlier, request], oneTimePurchase: false) != nil, "an earlier episode's \(decision)")
        }
        var decidedInTheLedger = request
        decidedInTheLedger.decidedLater = true
        #expect(RecoveryEvidence.question([decidedInTheLedger], oneTimePurchase: false) == nil, "a decision the ledger holds, signed after it")
        #expect(RecoveryEvidence.question([RecoveredNotification(type: "REFUND_REVERSED", signedDate: at(300)), request], oneTimePurchase: false) != nil)
    }

    @Test func aOneTimePurchasesRefundReversalOrRevocationAsksForItsHistoryAndItsChargeDoesNot() {
        for type in ["REFUND", "REFUND_REVERSED", "REVOKE"] {
            let recorded = [RecoveredNotification(type: type, signedDate: at(0))]
            #expect(RecoveryEvidence.question(recorded, oneTimePurchase: true) == .init(needsTransactionHistory: true), "\(type): copies no notification names")
        }
        #expect(RecoveryEvidence.question([RecoveredNotification(type: "ONE_TIME_CHARGE", signedDate: at(0))], oneTimePurchase: true) == nil)
        #expect(RecoveryEvidence.question([RecoveredNotification(type: "REFUND_DECLINED", signedDate: at(0))], oneTimePurchase: true) == nil)
    }

    @Test func aTypeAppleDoesNotDocumentYetAlwaysAsks() {
        let recorded = [RecoveredNotification(type: "SOMETHING_NEW", signedDate: at(0))]
        #expect(RecoveryEvidence.question(recorded, oneTimePurchase: false) == .init(needsTransactionHistory: false))
        #expect(RecoveryEvidence.question([], oneTimePurchase: true) == nil, "nothing recorded, nothing asked")
    }
}
