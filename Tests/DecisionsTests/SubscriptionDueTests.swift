import Decisions
import Foundation
import LedgerModel
import Testing

@Suite("What Apple owes a subscription, and by when")
struct SubscriptionDueTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func subscription(status: Int?, autoRenew: Int? = 1, expiresInHours: Double?, graceEndsInHours: Double? = nil) -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: "1", productId: "p", status: status, expiresDate: expiresInHours.map { now.addingTimeInterval($0 * 3600) },
            autoRenewStatus: autoRenew, autoRenewProductId: "p", isInBillingRetry: status == 3 || status == 4,
            gracePeriodExpiresDate: graceEndsInHours.map { now.addingTimeInterval($0 * 3600) }, lastSignedDate: now.addingTimeInterval(-86_400)
        )
    }

    @Test func eachStateIsOwedItsEventByItsEnd() {
        let renewing = SubscriptionDue.of(Self.subscription(status: 1, expiresInHours: 5))
        #expect(renewing == SubscriptionDue(expected: .renewalOrFailure, dueAt: Self.now.addingTimeInterval(5 * 3600)))
        #expect(SubscriptionDue.of(Self.subscription(status: 1, autoRenew: 0, expiresInHours: 5))?.expected == .expiry)
        let grace = SubscriptionDue.of(Self.subscription(status: 4, expiresInHours: -10, graceEndsInHours: 6))
        #expect(grace == SubscriptionDue(expected: .graceOutcome, dueAt: Self.now.addingTimeInterval(6 * 3600)))
        let retry = SubscriptionDue.of(Self.subscription(status: 3, expiresInHours: -24))
        #expect(retry == SubscriptionDue(expected: .retryOutcome, dueAt: Self.now.addingTimeInterval(-24 * 3600 + 60 * 86_400)))
        for status in [2, 5, nil] {
            #expect(SubscriptionDue.of(Self.subscription(status: status, expiresInHours: -5)) == nil, "\(String(describing: status))")
        }
        #expect(SubscriptionDue.of(Self.subscription(status: 1, expiresInHours: nil)) == nil)
    }

    /// Overdue only once more than `overdueAfter` past the due time; an early renewal, recorded,
    /// moved the expiry a period ahead and is owed nothing yet.
    @Test func overdueOnlyPastTheToleranceAndNeverForARenewalRecordedEarly() {
        #expect(SubscriptionDue.overdue(Self.subscription(status: 1, expiresInHours: -0.5), now: Self.now) == nil)
        let late = SubscriptionDue.overdue(Self.subscription(status: 1, expiresInHours: -3), now: Self.now)
        #expect(late.map { abs($0 - 3 * 3600) < 0.001 } == true, "\(String(describing: late))")
        #expect(SubscriptionDue.overdue(Self.subscription(status: 1, expiresInHours: -3), now: Self.now, after: 4 * 3600) == nil)
        // Renewed 20 hours before the old expiry (2 hours ago): the new period ends a day after it.
        #expect(SubscriptionDue.overdue(Self.subscription(status: 1, expiresInHours: -2 + 24), now: Self.now) == nil)
        // A grace period still running keeps an active row with a past expiry from being overdue.
        #expect(SubscriptionDue.overdue(Self.subscription(status: 1, expiresInHours: -5, graceEndsInHours: 2), now: Self.now) == nil)
        #expect(SubscriptionDue.overdue(Self.subscription(status: 3, expiresInHours: -24 * 61), now: Self.now) != nil)
    }
}
