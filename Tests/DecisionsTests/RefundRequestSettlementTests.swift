import Decisions
import Foundation
import Testing

/// A refund request is settled only by a decision of its episode signed after it.
@Suite struct RefundRequestSettlementTests {
    @Test func onlyARefundOrADeclineSignedAfterTheRequestSettlesIt() {
        let asked = Date(timeIntervalSince1970: 1_800_000_000)
        let after = asked.addingTimeInterval(60)
        let before = asked.addingTimeInterval(-60)
        #expect(RefundRequestSettlement.isSettled(requestSignedAt: asked, among: [("REFUND", after)]))
        #expect(RefundRequestSettlement.isSettled(requestSignedAt: asked, among: [("DID_RENEW", after), ("REFUND_DECLINED", after)]))
        #expect(!RefundRequestSettlement.isSettled(requestSignedAt: asked, among: [("REFUND", before), ("REFUND_DECLINED", asked)]), "an earlier episode's decision")
        #expect(!RefundRequestSettlement.isSettled(requestSignedAt: asked, among: [("CONSUMPTION_REQUEST", after), ("REFUND_REVERSED", after), ("DID_RENEW", after)]))
        #expect(!RefundRequestSettlement.isSettled(requestSignedAt: asked, among: [(type: String, signedDate: Date)]()))
    }
}
