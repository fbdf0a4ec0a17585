import Foundation
import LedgerModel
import LifecycleEvents
import Testing

/// The lifecycle events of a change, from the rows before and after it (issue 66): a row of the
/// table per event, and changes that are no event.
@Suite("Lifecycle events: a pure function of a subscription's rows before and after a change")
struct LifecycleEventTests {
    static let day = 86_400.0
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let token = UUID(uuidString: "7e3fb20b-4cdb-47cc-936d-99d65f608138")!

    static func subscription(
        status: Int, autoRenew: Int = 1, product: String = "monthly", next: String? = "monthly", expires: Date = now + 10 * day,
        grace: Date? = nil, intent: Int? = nil, signed: Date = now
    ) -> SubscriptionRecord {
        var row = SubscriptionRecord(
            originalTransactionId: "1000", productId: product, status: status, expiresDate: expires, autoRenewStatus: autoRenew,
            autoRenewProductId: next, isInBillingRetry: status == 3 || status == 4, gracePeriodExpiresDate: grace, lastSignedDate: signed,
            environment: "Production", bundleId: "com.example.app"
        )
        row.appAccountToken = token
        row.expirationIntent = intent
        return row
    }

    static func period(
        _ id: String, product: String = "monthly", starts: Date, days: Double = 30, reason: String = "RENEWAL", trial: Bool = false,
        revoked: Date? = nil, revocationType: String? = nil, ownership: String = "PURCHASED", upgraded: Bool? = nil
    ) -> TransactionRecord {
        var row = TransactionRecord(
            transactionId: id, originalTransactionId: "1000", productId: product, productType: "Auto-Renewable Subscription", purchaseDate: starts,
            expiresDate: starts + days * day, revocationDate: revoked, revocationReason: nil, isUpgraded: upgraded, signedDate: starts,
            environment: "Production", bundleId: "com.example.app", signedTransaction: "jws-\(id)"
        )
        row.transactionReason = reason
        row.offerDiscountType = trial ? "FREE_TRIAL" : nil
        row.revocationType = revocationType
        row.inAppOwnershipType = ownership
        return row
    }

    static let last = period("1", starts: now - 20 * day)
    static let trial = period("1", starts: now - 6 * day, days: 7, reason: "PURCHASE", trial: true)

    /// Each row: what it shows, the change, and the events it must give, in order.
    static let table: [(String, LifecycleChange, [LifecycleEventType])] = [
        (
            "a first paid purchase", LifecycleChange(before: nil, after: subscription(status: 1), transactions: [.init(before: nil, after: period("1", starts: now, reason: "PURCHASE"))], cause: .webhook, at: now),
            [.subscriptionStarted]
        ),
        (
            "a free trial", LifecycleChange(before: nil, after: subscription(status: 1), transactions: [.init(before: nil, after: trial)], cause: .webhook, at: now),
            [.trialStarted]
        ),
        (
            "the paid period after the trial",
            LifecycleChange(before: subscription(status: 1), after: subscription(status: 1, expires: now + 31 * day), transactions: [.init(before: nil, after: period("2", starts: now + day))], previous: trial, cause: .recovery, at: now + day),
            [.trialConverted]
        ),
        (
            "a renewal", LifecycleChange(before: subscription(status: 1), after: subscription(status: 1, expires: now + 40 * day), transactions: [.init(before: nil, after: period("2", starts: now + 10 * day))], previous: last, cause: .webhook, at: now + 10 * day),
            [.renewed]
        ),
        (
            "a renewal Apple could not charge, into billing retry", LifecycleChange(before: subscription(status: 1), after: subscription(status: 3), cause: .webhook, at: now + 11 * day),
            [.renewalFailed]
        ),
        (
            "a renewal Apple could not charge, into the grace period",
            LifecycleChange(before: subscription(status: 1), after: subscription(status: 4, grace: now + 16 * day), cause: .webhook, at: now + 11 * day),
            [.renewalFailed, .gracePeriodStarted]
        ),
        (
            "billing retry turned grace period", LifecycleChange(before: subscription(status: 3), after: subscription(status: 4, grace: now + 16 * day), cause: .repair, at: now + 11 * day),
            [.gracePeriodStarted]
        ),
        (
            "the grace period over, still in billing retry",
            LifecycleChange(before: subscription(status: 4, grace: now + 16 * day), after: subscription(status: 3, grace: now + 16 * day), cause: .webhook, at: now + 16 * day),
            [.gracePeriodEnded]
        ),
        (
            "billing recovered: the charge went through",
            LifecycleChange(before: subscription(status: 3), after: subscription(status: 1, expires: now + 42 * day), transactions: [.init(before: nil, after: period("2", starts: now + 12 * day))], previous: last, cause: .recovery, at: now + 12 * day),
            [.renewed, .billingRecovered]
        ),
        (
            "expired after billing retry", LifecycleChange(before: subscription(status: 3), after: subscription(status: 2, intent: 2), cause: .webhook, at: now + 70 * day),
            [.expired]
        ),
        (
            "a full refund",
            LifecycleChange(before: subscription(status: 1), after: subscription(status: 5), transactions: [.init(before: last, after: period("1", starts: now - 20 * day, revoked: now, revocationType: "REFUND_FULL"))], cause: .webhook, at: now),
            [.refunded]
        ),
        (
            "the refund reversed",
            LifecycleChange(before: subscription(status: 5), after: subscription(status: 1), transactions: [.init(before: period("1", starts: now - 20 * day, revoked: now, revocationType: "REFUND_FULL"), after: last)], cause: .webhook, at: now + day),
            [.refundReversed]
        ),
        (
            "a family member's access revoked",
            LifecycleChange(before: subscription(status: 1), after: subscription(status: 5), transactions: [.init(before: period("1", starts: now - 20 * day, ownership: "FAMILY_SHARED"), after: period("1", starts: now - 20 * day, revoked: now, revocationType: "FAMILY_REVOKE", ownership: "FAMILY_SHARED"))], cause: .repair, at: now),
            [.revoked]
        ),
        (
            "an upgrade, at once",
            LifecycleChange(
                before: subscription(status: 1), after: subscription(status: 1, product: "premium", next: "premium", expires: now + 30 * day),
                transactions: [.init(before: last, after: period("1", starts: now - 20 * day, upgraded: true)), .init(before: nil, after: period("2", product: "premium", starts: now, reason: "PURCHASE"))],
                previous: last, cause: .webhook, at: now
            ),
            [.upgraded]
        ),
        (
            "a downgrade for the next renewal", LifecycleChange(before: subscription(status: 1), after: subscription(status: 1, next: "basic"), cause: .webhook, at: now),
            [.downgraded]
        ),
        (
            "a crossgrade for the next renewal, the levels known",
            LifecycleChange(before: subscription(status: 1), after: subscription(status: 1, next: "monthly.family"), cause: .webhook, at: now, levels: ProductLevels(["monthly": 2, "monthly.family": 2])),
            [.crossgraded]
        ),
        (
            "auto-renew turned off", LifecycleChange(before: subscription(status: 1), after: subscription(status: 1, autoRenew: 0), cause: .webhook, at: now),
            [.autoRenewDisabled]
        ),
        (
            "auto-renew turned on again", LifecycleChange(before: subscription(status: 1, autoRenew: 0), after: subscription(status: 1), cause: .recovery, at: now),
            [.autoRenewEnabled]
        ),
        (
            "a renewal date extended",
            LifecycleChange(before: subscription(status: 1), after: subscription(status: 1, expires: now + 17 * day), transactions: [.init(before: last, after: period("1", starts: now - 20 * day, days: 37))], cause: .repair, at: now),
            [.extended]
        ),
        (
            "no event: Apple re-signed the same values",
            LifecycleChange(before: subscription(status: 1, signed: now - day), after: subscription(status: 1, signed: now), transactions: [.init(before: last, after: last)], cause: .webhook, at: now),
            []
        ),
        (
            "no event: the plan Apple marks upgraded from, alone", LifecycleChange(before: subscription(status: 1), after: subscription(status: 1), transactions: [.init(before: last, after: period("1", starts: now - 20 * day, revoked: now, upgraded: true))], cause: .repair, at: now),
            []
        ),
    ]

    @Test(arguments: table.indices)
    func eachChangeGivesItsEventsInOrder(_ index: Int) {
        let (name, change, expected) = Self.table[index]
        let events = change.events
        #expect(events.map(\.type) == expected, "\(name)")
        for event in events {
            #expect(event.originalTransactionId == "1000" && event.bundleId == "com.example.app" && event.environment == "Production", "\(name)")
            #expect(event.appAccountToken == Self.token && event.cause == change.cause, "\(name)")
        }
    }

    @Test func theTableShowsEveryEventType() {
        let shown = Set(Self.table.flatMap(\.2))
        #expect(Set(LifecycleEventType.allCases).subtracting(shown).isEmpty, "not in the table: \(Set(LifecycleEventType.allCases).subtracting(shown))")
    }

    @Test func anEventCarriesTheEntitlementAfterTheChangeTheTransactionAndWhyItExpired() throws {
        let renewal = Self.table.first { $0.0 == "a renewal" }!.1.events[0]
        #expect(renewal.entitled && renewal.transactionId == "2" && renewal.effectiveAt == Self.now + 10 * Self.day && renewal.productId == "monthly")
        let expired = try #require(Self.table.first { $0.0 == "expired after billing retry" }?.1.events.first)
        #expect(!expired.entitled && expired.reason == .billingError && expired.transactionId == nil)
        let refund = try #require(Self.table.first { $0.0 == "a full refund" }?.1.events.first)
        #expect(!refund.entitled && refund.effectiveAt == Self.now)
        // In grace the customer keeps access until the grace period ends.
        let grace = try #require(Self.table.first { $0.0 == "a renewal Apple could not charge, into the grace period" }?.1.events.last)
        #expect(grace.entitled)
        #expect(LifecycleChange.entitled(Self.subscription(status: 4, grace: Self.now - 1), at: Self.now) == false)
        #expect(LifecycleChange.entitled(Self.subscription(status: 1, expires: Self.now), at: Self.now) == false, "an expiry now is no access")
        #expect([1, 2, 3, 4, 5, nil].map { ExpiryReason(expirationIntent: $0).rawValue } == ["voluntary", "billing_error", "price_increase", "product_not_for_sale", "other", "other"])
    }

    /// Whoever wrote it, the same change gives the same events, but for the cause.
    @Test func theSameChangeGivesTheSameEventsFromEveryWriter() {
        for (name, change, _) in Self.table {
            var events: [[LifecycleEvent]] = []
            for cause in LifecycleCause.allCases {
                var written = change
                written.cause = cause
                events.append(written.events.map { var event = $0; event.cause = .webhook; return event })
            }
            #expect(Set(events.map { $0.map(\.type) }).count == 1 && events.allSatisfy { $0 == events[0] }, "\(name)")
        }
    }
}
