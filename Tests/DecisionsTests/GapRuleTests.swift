import Foundation
import LedgerModel
import Testing

@testable import Decisions

@Suite("Gap rules, without I/O")
struct GapRuleTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func view(status: Int = 1, expires: TimeInterval, signed: TimeInterval = 1_799_000_000, transactions: [(TimeInterval, TimeInterval, TimeInterval)] = [], notifications: [(String, String?, TimeInterval)] = []) -> CustomerLedgerView {
        CustomerLedgerView(
            originalTransactionId: "1",
            subscription: SubscriptionRecord(
                originalTransactionId: "1", productId: "p", status: status, expiresDate: Date(timeIntervalSince1970: expires), autoRenewStatus: 1,
                autoRenewProductId: "p", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: signed)
            ),
            transactions: transactions.enumerated().map { index, dates in
                .init(transactionId: "t\(index)", productType: "Auto-Renewable Subscription", purchaseDate: Date(timeIntervalSince1970: dates.0),
                      expiresDate: Date(timeIntervalSince1970: dates.1), revocationDate: nil, signedDate: Date(timeIntervalSince1970: dates.2))
            },
            notifications: notifications.map { .init(type: $0.0, subtype: $0.1, signedDate: Date(timeIntervalSince1970: $0.2)) }
        )
    }

    /// A view each rule alone selects.
    func fixture(for reason: GapReason) -> CustomerLedgerView? {
        let past = now.timeIntervalSince1970 - 7200
        let future = now.timeIntervalSince1970 + 86_400
        switch reason {
        case .overdue: return view(expires: past)
        case .rowOlderThanTransactions: return view(expires: future, signed: 1_000, transactions: [(900, future, 2_000)])
        case .transactionChainGap: return view(expires: future, signed: 5_000, transactions: [(1_000, 2_000, 1_000), (5_000, future, 5_000)])
        case .skippedStep: return view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "VOLUNTARY", 2_000)])
        case .refundFlow: return view(expires: future, notifications: [("DID_RENEW", nil, 1_000), ("REFUND", nil, 2_000)])
        case .contradictedByTransactions: return lateFailure()
        case .recoveredInWindow, .payloadRejected, .named, .imported, .audited: return nil
        }
    }

    /// Issue 48, point 1: the renewal (T2) recorded, then a DID_FAIL_TO_RENEW Apple signed hours
    /// later carrying the period before it (T1): the row says billing retry on T1's expiry.
    func lateFailure() -> CustomerLedgerView {
        let e1 = now.timeIntervalSince1970 - 86_400
        return view(
            status: 3, expires: e1, signed: now.timeIntervalSince1970 - 3_600,
            transactions: [(e1 - 30 * 86_400, e1, e1 - 30 * 86_400), (e1, e1 + 30 * 86_400, e1 + 6 * 3_600)]
        )
    }

    @Test func aLaterSignedNotificationThatLeavesTheRowOnAnOlderPeriodThanARecordedTransactionSelectsTheAccount() {
        let late = lateFailure()
        #expect(GapRules.evaluate(late, now: now) == [.contradictedByTransactions])
        #expect(!GapReason.contradictedByTransactions.needsTransactionHistory, "the statuses tell the truth")
        // Whatever the status the late notification wrote: an older period than a recorded transaction.
        var active = late
        active.subscription?.status = 1
        active.subscription?.expiresDate = now.addingTimeInterval(3_600)
        active.transactions[1].expiresDate = now.addingTimeInterval(86_400)
        #expect(GapRules.evaluate(active, now: now) == [.contradictedByTransactions])
        // Not a contradiction: the later transaction refunded, upgraded from, or not a subscription's.
        for change in 0..<3 {
            var other = late
            switch change {
            case 0: other.transactions[1].revocationDate = now.addingTimeInterval(-7_200)
            case 1: other.transactions[1].isUpgraded = true
            default: other.transactions[1].productType = "Non-Consumable"
            }
            #expect(!ContradictedByTransactions().selects(other, now: now), "case \(change)")
        }
        // An annual plan upgraded from, not yet known as such (the notifications carry only the
        // new plan): it ends later than the current monthly row, but it was bought before the
        // current period, so it contradicts nothing.
        var upgraded = late
        upgraded.subscription?.status = 1
        upgraded.subscription?.expiresDate = now.addingTimeInterval(20 * 86_400)
        upgraded.transactions = [
            .init(transactionId: "annual", productType: "Auto-Renewable Subscription", purchaseDate: now.addingTimeInterval(-40 * 86_400),
                  expiresDate: now.addingTimeInterval(325 * 86_400), revocationDate: nil, signedDate: now.addingTimeInterval(-40 * 86_400)),
            .init(transactionId: "monthly", productType: "Auto-Renewable Subscription", purchaseDate: now.addingTimeInterval(-10 * 86_400),
                  expiresDate: now.addingTimeInterval(20 * 86_400), revocationDate: nil, signedDate: now.addingTimeInterval(-10 * 86_400)),
        ]
        #expect(!ContradictedByTransactions().selects(upgraded, now: now), "an upgrade is no contradiction")
        // The row on the latest period: no contradiction.
        var current = late
        current.subscription?.expiresDate = current.transactions[1].expiresDate
        #expect(!ContradictedByTransactions().selects(current, now: now))
        // Apple's answer, applied by pass 2, is signed before the verification: never selected again.
        var verified = late
        verified.verifiedAt = now.addingTimeInterval(-60)
        #expect(!ContradictedByTransactions().selects(verified, now: now))
        verified.verifiedAt = now.addingTimeInterval(-7_200)
        #expect(ContradictedByTransactions().selects(verified, now: now), "a late notification signed after the verification")
    }

    @Test func eachRuleSelectsItsOwnContradictionAndNoOtherRuleDoes() {
        #expect(Set(GapRules.all().map(\.reason)).count == GapRules.all().count, "one rule per reason")
        for rule in GapRules.all() {
            guard let own = fixture(for: rule.reason) else {
                Issue.record("no fixture for \(rule.reason)")
                continue
            }
            #expect(rule.selects(own, now: now), "\(rule.reason) selects its own contradiction")
            #expect(GapRules.evaluate(own, now: now) == [rule.reason], "only \(rule.reason) selects it")
        }
        let healthy = view(expires: now.timeIntervalSince1970 + 86_400, notifications: [("DID_RENEW", nil, 1_000)])
        #expect(GapRules.evaluate(healthy, now: now).isEmpty)
    }

    @Test func theReasonsARuleCannotFindAreTheOnesTheRunGives() {
        let ruled = Set(GapRules.all().map(\.reason))
        #expect(Set(GapReason.allCases).subtracting(ruled) == [.recoveredInWindow, .payloadRejected, .named, .imported, .audited])
    }

    @Test func anActiveSubscriptionPastItsExpiryIsAGapButOneJustExpiredIsNotYet() {
        #expect(GapRules.evaluate(view(expires: now.timeIntervalSince1970 - 7200), now: now) == [.overdue])
        #expect(GapRules.evaluate(view(expires: now.timeIntervalSince1970 - 600), now: now).isEmpty, "a renewal may still be on its way")
        #expect(GapRules.evaluate(view(status: 2, expires: now.timeIntervalSince1970 - 7200), now: now).isEmpty)
    }

    @Test func aRowOlderThanTheNewestTransactionIsAGap() {
        let future = now.timeIntervalSince1970 + 86_400
        let row = view(expires: future, signed: 1_000, transactions: [(900, future, 2_000)])
        #expect(GapRules.evaluate(row, now: now) == [.rowOlderThanTransactions])
    }

    @Test func aRenewalAfterALapseIsAGapUnlessABillingFailureExplainsIt() {
        let future = now.timeIntervalSince1970 + 86_400
        let chain = [(1_000.0, 2_000.0, 1_000.0), (5_000.0, future, 5_000.0)]
        #expect(GapRules.evaluate(view(expires: future, signed: 5_000, transactions: chain), now: now) == [.transactionChainGap])
        let explained = view(expires: future, signed: 5_000, transactions: chain, notifications: [("DID_FAIL_TO_RENEW", nil, 2_000)])
        #expect(GapRules.evaluate(explained, now: now).isEmpty)
        let contiguous = [(1_000.0, 2_000.0, 1_000.0), (2_000.0, future, 2_000.0)]
        #expect(GapRules.evaluate(view(expires: future, signed: 2_000, transactions: contiguous), now: now).isEmpty)
    }

    @Test func aContradictionOlderThanTheLastVerificationSelectsNoOneAgain() {
        let future = now.timeIntervalSince1970 + 86_400
        var skipped = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "VOLUNTARY", 2_000)])
        skipped.verifiedAt = Date(timeIntervalSince1970: 3_000)
        for index in skipped.notifications.indices { skipped.notifications[index].recordedAt = Date(timeIntervalSince1970: 2_500) }
        #expect(GapRules.evaluate(skipped, now: now).isEmpty, "verified after everything it holds")
        for index in skipped.notifications.indices { skipped.notifications[index].recordedAt = Date(timeIntervalSince1970: 3_500) }
        #expect(GapRules.evaluate(skipped, now: now) == [.skippedStep], "something recorded since")
        var overdue = view(expires: now.timeIntervalSince1970 - 7200)
        overdue.verifiedAt = now.addingTimeInterval(-60)
        #expect(GapRules.evaluate(overdue, now: now).isEmpty, "verified after the expiry had passed")
        overdue.verifiedAt = now.addingTimeInterval(-86_400)
        #expect(GapRules.evaluate(overdue, now: now) == [.overdue], "verified before it passed")
    }

    @Test func aSkippedStepVerifiedBeforeIsNotSelectedAgainBySomethingNewerThatIsNotAGap() {
        let future = now.timeIntervalSince1970 + 86_400
        var view = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "VOLUNTARY", 2_000), ("SUBSCRIBED", "RESUBSCRIBE", 5_000)])
        view.verifiedAt = Date(timeIntervalSince1970: 3_000)
        view.notifications[0].recordedAt = Date(timeIntervalSince1970: 1_000)
        view.notifications[1].recordedAt = Date(timeIntervalSince1970: 2_000)
        view.notifications[2].recordedAt = Date(timeIntervalSince1970: 5_000)
        #expect(GapRules.evaluate(view, now: now).isEmpty, "the old skipped step was verified; the resubscription is no gap")
        view.notifications[1].recordedAt = Date(timeIntervalSince1970: 4_000)
        #expect(GapRules.evaluate(view, now: now) == [.skippedStep], "a skipped step recorded after the verification counts")
    }

    @Test func aChainGapCountsUntilTheTransactionHistoryIsCheckedNotJustTheStatuses() {
        let future = now.timeIntervalSince1970 + 86_400
        var gap = view(expires: future, signed: 5_000, transactions: [(1_000.0, 2_000.0, 1_000.0), (5_000.0, future, 5_000.0)])
        for index in gap.transactions.indices { gap.transactions[index].recordedAt = Date(timeIntervalSince1970: 5_000) }
        gap.verifiedAt = Date(timeIntervalSince1970: 6_000)
        #expect(GapRules.evaluate(gap, now: now) == [.transactionChainGap], "a statuses-only check does not see missing transactions")
        gap.transactionsVerifiedAt = Date(timeIntervalSince1970: 6_000)
        #expect(GapRules.evaluate(gap, now: now).isEmpty, "the transaction history was checked after it")
    }

    @Test func anExpiryThatSkipsItsStepIsAGap() {
        let future = now.timeIntervalSince1970 + 86_400
        let skipped = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "VOLUNTARY", 2_000)])
        #expect(GapRules.evaluate(skipped, now: now) == [.skippedStep])
        let stepped = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", 1_500), ("EXPIRED", "VOLUNTARY", 2_000)])
        #expect(GapRules.evaluate(stepped, now: now).isEmpty)
        let billing = view(status: 2, expires: future, notifications: [("DID_RENEW", nil, 1_000), ("EXPIRED", "BILLING_RETRY", 2_000)])
        #expect(GapRules.evaluate(billing, now: now) == [.skippedStep])
    }

    @Test func aRefundFlowNotificationRecordedSinceTheHistoryWasCheckedSelectsTheAccountWithItsHistory() {
        let future = now.timeIntervalSince1970 + 86_400
        for type in ["REFUND", "REFUND_DECLINED", "REFUND_REVERSED", "CONSUMPTION_REQUEST"] {
            var refund = view(expires: future, notifications: [("DID_RENEW", nil, 1_000), (type, nil, 2_000)])
            refund.notifications[1].recordedAt = Date(timeIntervalSince1970: 2_000)
            #expect(GapRules.evaluate(refund, now: now) == [.refundFlow], "\(type), live or recovered, never checked")
            #expect(GapReason.refundFlow.needsTransactionHistory)
            refund.transactionsVerifiedAt = Date(timeIntervalSince1970: 3_000)
            #expect(GapRules.evaluate(refund, now: now).isEmpty, "\(type): the history was checked after it")
        }
    }

    /// Issue 64, point 3: a subscription's refund flow asks Apple only where it leaves doubt.
    @Test func aDecidedRefundFlowAboutTheNewestTransactionAsksNothingButOneAboutAPlanUpgradedFromOrUndecidedAsks() {
        let future = now.timeIntervalSince1970 + 86_400
        // t0: the annual plan bought at 1,000; t1: the monthly plan the customer upgraded to at 5,000.
        func refundFlow(_ notifications: [(String, TimeInterval, String?)]) -> CustomerLedgerView {
            var refund = view(expires: future, transactions: [(1_000, future + 300 * 86_400, 1_000), (5_000, future, 5_000)])
            refund.notifications = notifications.map { .init(type: $0.0, subtype: nil, signedDate: Date(timeIntervalSince1970: $0.1), transactionId: $0.2) }
            return refund
        }
        for decision in ["REFUND", "REFUND_DECLINED", "REFUND_REVERSED"] {
            #expect(GapRules.evaluate(refundFlow([(decision, 6_000, "t1")]), now: now).isEmpty, "\(decision) about the newest transaction")
            #expect(GapRules.evaluate(refundFlow([(decision, 6_000, "t0")]), now: now) == [.refundFlow], "\(decision) about the plan upgraded from")
            #expect(GapRules.evaluate(refundFlow([(decision, 6_000, "t9")]), now: now) == [.refundFlow], "\(decision) about a transaction the ledger lacks")
            #expect(GapRules.evaluate(refundFlow([(decision, 6_000, nil)]), now: now) == [.refundFlow], "\(decision) without its transaction")
        }
        #expect(GapRules.evaluate(refundFlow([("CONSUMPTION_REQUEST", 6_000, "t1")]), now: now) == [.refundFlow], "undecided: the decision may be lost")
        #expect(GapRules.evaluate(refundFlow([("CONSUMPTION_REQUEST", 6_000, "t1"), ("REFUND_DECLINED", 7_000, "t1")]), now: now).isEmpty)
        #expect(
            GapRules.evaluate(refundFlow([("REFUND_DECLINED", 5_500, "t1"), ("CONSUMPTION_REQUEST", 6_000, "t1")]), now: now) == [.refundFlow],
            "a decision signed before the request does not decide it")
        var upgraded = refundFlow([("REFUND_DECLINED", 6_000, "t1")])
        upgraded.transactions[1].isUpgraded = true
        #expect(GapRules.evaluate(upgraded, now: now).contains(.refundFlow), "the ledger knows the transaction was upgraded from")
    }

    /// A dry run's rules judge the ledger as the real run would leave it (`LedgerOverlay.view`).
    @Test func aDryRunsViewHasTheRowsAndNotificationsPassOneWouldWrite() throws {
        let future = now.timeIntervalSince1970 + 86_400
        let ledger = view(expires: now.timeIntervalSince1970 - 7_200, transactions: [(1_000, now.timeIntervalSince1970 - 7_200, 1_000)])
        #expect(GapRules.evaluate(ledger, now: now) == [.overdue], "as the ledger stands")
        var overlay = LedgerOverlay()
        var renewed = try #require(ledger.subscription)
        renewed.expiresDate = Date(timeIntervalSince1970: future)
        overlay.subscriptions["1"] = renewed
        func transaction(_ id: String, purchased: TimeInterval, expires: TimeInterval) -> TransactionRecord {
            TransactionRecord(
                transactionId: id, originalTransactionId: "1", productId: "p", productType: "Auto-Renewable Subscription",
                purchaseDate: Date(timeIntervalSince1970: purchased), expiresDate: Date(timeIntervalSince1970: expires), revocationDate: nil,
                revocationReason: nil, isUpgraded: nil, signedDate: Date(timeIntervalSince1970: purchased), environment: nil, bundleId: nil, signedTransaction: "")
        }
        overlay.transactions = ["t1": transaction("t1", purchased: 5_000, expires: future)]
        let recovered = [RecoveredNotification(type: "REFUND_DECLINED", signedDate: Date(timeIntervalSince1970: 6_000), transactionId: "t0")]
        let seen = try #require(overlay.view(of: "1", ledger: ledger, recovered: recovered))
        #expect(seen.transactions.map(\.transactionId) == ["t0", "t1"])
        #expect(seen.notifications.map(\.type) == ["REFUND_DECLINED"])
        #expect(GapRules.evaluate(seen, now: now) == [.refundFlow], "renewed, not overdue; the decision is about the plan upgraded from")
        #expect(overlay.view(of: "2", ledger: nil, recovered: recovered) == nil, "no subscription row: a one-time purchase's")
    }

    @Test func aSubscriptionPastItsGracePeriodOrPastItsBillingRetryIsAGap() {
        let hour: TimeInterval = 3600
        // Status 4: stale once the grace period has ended (an hour's tolerance).
        var grace = view(status: 4, expires: now.timeIntervalSince1970 - 10 * hour)
        grace.subscription?.gracePeriodExpiresDate = now.addingTimeInterval(-2 * hour)
        #expect(GapRules.evaluate(grace, now: now) == [.overdue])
        grace.subscription?.gracePeriodExpiresDate = now.addingTimeInterval(hour)
        #expect(GapRules.evaluate(grace, now: now).isEmpty, "still in its grace period")
        // Status 3: Apple retries billing for up to 60 days after the expiry.
        let retrying = view(status: 3, expires: now.timeIntervalSince1970 - 59 * 86_400)
        #expect(GapRules.evaluate(retrying, now: now).isEmpty, "still retrying")
        var ended = view(status: 3, expires: now.timeIntervalSince1970 - 61 * 86_400)
        #expect(GapRules.evaluate(ended, now: now) == [.overdue])
        ended.verifiedAt = now.addingTimeInterval(-hour)
        #expect(GapRules.evaluate(ended, now: now).isEmpty, "verified after the retry ended")
    }

    @Test func overdueAfterIsTheOperatorsToSet() {
        // Due two hours ago: overdue after the default hour, not yet after three.
        let late = view(expires: now.timeIntervalSince1970 - 7200)
        #expect(GapRules.evaluate(late, now: now, overdueAfter: 3 * 3600).isEmpty)
        #expect(GapRules.evaluate(late, now: now, overdueAfter: 3600) == [.overdue])
        #expect(GapRules.evaluate(late, now: now, overdueAfter: 0) == [.overdue])
    }

    @Test func anActiveSubscriptionWhoseAutoRenewIsOffIsOverdueOnceItsExpiryPassesWithoutAnExpiry() {
        var off = view(expires: now.timeIntervalSince1970 - 7200)
        off.subscription?.autoRenewStatus = 0
        #expect(GapRules.evaluate(off, now: now) == [.overdue])
        off.subscription?.expiresDate = now.addingTimeInterval(-600)
        #expect(GapRules.evaluate(off, now: now).isEmpty, "the EXPIRED may still be on its way")
    }

    @Test func aRenewalChargedEarlyIsNeverOverdue() {
        // Apple charged the renewal 20 hours before the period's end; the DID_RENEW recorded moved
        // the expiry a month on: nothing is owed until then, long after the old expiry has passed.
        let oldExpiry = now.timeIntervalSince1970 - 4 * 3600
        let renewed = view(
            expires: oldExpiry + 30 * 86_400, signed: oldExpiry - 20 * 3600,
            transactions: [(oldExpiry - 30 * 86_400, oldExpiry, oldExpiry - 30 * 86_400), (oldExpiry, oldExpiry + 30 * 86_400, oldExpiry - 20 * 3600)]
        )
        #expect(GapRules.evaluate(renewed, now: now).isEmpty)
    }
}
