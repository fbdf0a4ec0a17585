import AppStoreServerModel
import Decisions
import Foundation
import LedgerModel
import RemedyDecisions
import SignedData
import Testing

@Suite("Who an outage hurt, and the days each gets")
struct CompensationRulesTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func grant(
        _ type: String, subtype: String? = nil, id: String = "1", signedHoursAgo: Double, recordedHoursAgo: Double = 0, status: Int = 1,
        expiresInHours: Double = 100, liveHoursAgo: Double? = nil, accessHeldHoursAgo: Double? = nil
    ) -> MissedGrant {
        MissedGrant(
            originalTransactionId: id, notificationUUID: UUID(), notificationType: type, subtype: subtype, signedDate: now.addingTimeInterval(-signedHoursAgo * 3600),
            recordedAt: now.addingTimeInterval(-recordedHoursAgo * 3600), grantedLiveAt: liveHoursAgo.map { now.addingTimeInterval(-$0 * 3600) }, productId: "p",
            status: status, expiresDate: now.addingTimeInterval(expiresInHours * 3600),
            accessHeldUntil: accessHeldHoursAgo.map { now.addingTimeInterval(-$0 * 3600) }
        )
    }

    /// Issue 62, point 1: a renewal Apple charged before the period ended denied nothing until
    /// the old expiry (or a billing grace period's end); a new subscription or a refund reversed
    /// denied from its signing; an offer redeemed, a renewal extended, a renewal preference
    /// changed never removed access.
    @Test func aRenewalDeniesFromTheEndOfTheAccessHeldAndSomeTypesNever() {
        // Signed 30 h ago, 10 h before the old expiry (20 h ago); recorded now: 20 hours denied.
        #expect(CompensationRules.hoursDenied(by: Self.grant("DID_RENEW", signedHoursAgo: 30, accessHeldHoursAgo: 20)) == 20)
        // Signed 30 h ago, old expiry 5 h from now, recorded now: nothing denied.
        #expect(CompensationRules.hoursDenied(by: Self.grant("DID_RENEW", signedHoursAgo: 30, accessHeldHoursAgo: -5)) == 0)
        // Signed after the old expiry (billing retry): from its signing.
        #expect(CompensationRules.hoursDenied(by: Self.grant("DID_RENEW", subtype: "BILLING_RECOVERY", signedHoursAgo: 30, accessHeldHoursAgo: 50)) == 30)
        // In billing grace until 2 h from now: nothing denied.
        #expect(CompensationRules.hoursDenied(by: Self.grant("DID_RENEW", subtype: "BILLING_RECOVERY", signedHoursAgo: 30, accessHeldHoursAgo: -2)) == 0)
        // Unknown access held: from its signing.
        #expect(CompensationRules.hoursDenied(by: Self.grant("DID_RENEW", signedHoursAgo: 30)) == 30)
        // Begins access: from its signing, whatever the previous transaction held.
        #expect(CompensationRules.hoursDenied(by: Self.grant("SUBSCRIBED", subtype: "RESUBSCRIBE", signedHoursAgo: 30, accessHeldHoursAgo: -5)) == 30)
        #expect(CompensationRules.hoursDenied(by: Self.grant("REFUND_REVERSED", signedHoursAgo: 12)) == 12)
        for (type, subtype) in [
            ("OFFER_REDEEMED", nil), ("OFFER_REDEEMED", "UPGRADE"), ("OFFER_REDEEMED", "DOWNGRADE"), ("RENEWAL_EXTENDED", nil),
            ("DID_CHANGE_RENEWAL_PREF", "UPGRADE"), ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE"), ("EXPIRED", "VOLUNTARY"),
        ] {
            #expect(CompensationRules.hoursDenied(by: Self.grant(type, subtype: subtype, signedHoursAgo: 30)) == nil, "\(type) \(subtype ?? "")")
        }
    }

    /// Apple's limit, two extensions of a subscription in 365 days, counted from the ledger's facts:
    /// the tool's own other requests that extended or may have, or Apple's notifications that it
    /// extended one, whichever says more; older than 365 days, refused or never sent: not counted.
    @Test func theYearlyCountIsTheLargerOfOurRequestsAndApplesNotificationsWithin365Days() {
        let id = UUID()
        let missed = UUID()
        let day: TimeInterval = 86_400
        func request(_ outcome: String, daysAgo: Double, for uuids: [UUID] = [], id: UUID = UUID()) -> ExtensionFacts.Request {
            .init(requestIdentifier: id, outcome: outcome, requestedAt: Self.now.addingTimeInterval(-daysAgo * day), notificationUUIDs: uuids)
        }
        let facts = ExtensionFacts(
            requests: [
                request("extended", daysAgo: 10), request("pending", daysAgo: 200), request("extended", daysAgo: 365.01),
                request("refused", daysAgo: 5), request("not_sent", daysAgo: 5), request("skipped", daysAgo: 5),
                // This very request, pending from an earlier compensate of the window: not another one.
                request("pending", daysAgo: 1, id: id),
            ],
            extendedByApple: [Self.now.addingTimeInterval(-10 * day)], earlier: nil
        )
        let history = CompensationRules.history(facts, requestIdentifier: id, missed: [missed], now: Self.now)
        #expect(history.inLastYear == 2 && !history.compensatedElsewhere)
        // Apple's notifications alone (another tool's extensions, or requests the ledger lost).
        let notified = ExtensionFacts(requests: [], extendedByApple: [1, 100, 364.9, 366].map { Self.now.addingTimeInterval(-$0 * day) }, earlier: nil)
        #expect(CompensationRules.history(notified, requestIdentifier: id, missed: [missed], now: Self.now).inLastYear == 3)
        // Another window's request for the same missed notification, however old: made good already.
        let elsewhere = ExtensionFacts(requests: [request("extended", daysAgo: 400, for: [missed])], extendedByApple: [], earlier: nil)
        #expect(CompensationRules.history(elsewhere, requestIdentifier: id, missed: [missed], now: Self.now).compensatedElsewhere)
        let refusedElsewhere = ExtensionFacts(requests: [request("refused", daysAgo: 4, for: [missed])], extendedByApple: [], earlier: nil)
        #expect(!CompensationRules.history(refusedElsewhere, requestIdentifier: id, missed: [missed], now: Self.now).compensatedElsewhere)
        #expect(CompensationRules.extensionsAllowedIn365Days == 2)
    }

    /// Apple's notificationType page (endpoints-that-change.md §9): a subscription bought, renewed
    /// or its refund reversed gave access back; an offer redeemed, a renewal date extended or a
    /// renewal preference changed (an upgrade) came while the customer had access. Only
    /// RENEWAL_EXTENDED says Apple extended one subscription's renewal date.
    @Test func theTypesCompensateNamesComeFromThePolicyTable() {
        #expect(CompensationRules.typesThatDeny == ["SUBSCRIBED", "DID_RENEW", "REFUND_REVERSED"])
        #expect(CompensationRules.typesThatNeverDeny == ["DID_CHANGE_RENEWAL_PREF", "OFFER_REDEEMED", "RENEWAL_EXTENDED"])
        #expect(CompensationRules.typesThatExtend == ["RENEWAL_EXTENDED"])
        #expect(Set(CompensationRules.typesThatMayGrant).isSuperset(of: CompensationRules.typesThatDeny + CompensationRules.typesThatNeverDeny))
    }

    @Test func everyTypeThatGrantsSaysWhenItsDenialStartsAndOnlyRenewalsWaitForTheAccessHeld() {
        for type in NotificationType.documented where type.policy.access == .grants {
            let start = type.policy.denialStart
            switch type {
            case .didRenew: #expect(start == .endOfAccessHeld)
            case .subscribed, .refundReversed, .oneTimeCharge: #expect(start == .signedDate, "\(type.rawValue)")
            default: #expect(start == .never, "\(type.rawValue)")
            }
        }
        #expect(NotificationType.didChangeRenewalPref.policy.denialStart == .never)
    }

    @Test func onlyNotificationsThatGrantAccessHurtAndOnlyWhileActiveNow() {
        let hurt = CompensationRules.hurt(
            [
                Self.grant("DID_RENEW", id: "renewed", signedHoursAgo: 30),
                Self.grant("EXPIRED", id: "expired-missed", signedHoursAgo: 30),
                Self.grant("DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE", id: "downgrade", signedHoursAgo: 30),
                Self.grant("DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE", id: "upgrade", signedHoursAgo: 30),
                Self.grant("DID_RENEW", id: "expired-now", signedHoursAgo: 30, status: 2, expiresInHours: -1),
                Self.grant("DID_RENEW", id: "lapsed", signedHoursAgo: 30, expiresInHours: -1),
                Self.grant("SUBSCRIBED", subtype: "RESUBSCRIBE", id: "short", signedHoursAgo: 0.5),
                Self.grant("DID_RENEW", id: "live-later", signedHoursAgo: 30, liveHoursAgo: 29.5),
            ],
            minimumHours: 1, now: Self.now
        )
        #expect(hurt.map(\.originalTransactionId) == ["renewed"], "an upgrade's customer had the lower level meanwhile")
        #expect(hurt.first?.hoursDenied == 30)
    }

    /// A renewal recorded before the old period ran out is counted as denying nothing and is
    /// never hurt, even with --min-hours 0; one recorded after it is.
    @Test func aRenewalRecordedBeforeTheAccessHeldEndedDeniedNothingEvenWithNoMinimum() {
        let missed = [
            Self.grant("DID_RENEW", id: "in-time", signedHoursAgo: 10, accessHeldHoursAgo: -2),
            Self.grant("DID_RENEW", id: "late", signedHoursAgo: 10, accessHeldHoursAgo: 4),
            Self.grant("RENEWAL_EXTENDED", id: "extended", signedHoursAgo: 10),
        ]
        #expect(CompensationRules.deniedNothing(missed) == 1)
        let hurt = CompensationRules.hurt(missed, minimumHours: 0, now: Self.now)
        #expect(hurt.map(\.originalTransactionId) == ["late"] && hurt.first?.hoursDenied == 4)
    }

    @Test func theLongestDenialOfASubscriptionCounts() {
        let hurt = CompensationRules.hurt(
            [Self.grant("DID_RENEW", signedHoursAgo: 10), Self.grant("SUBSCRIBED", signedHoursAgo: 50), Self.grant("REFUND_REVERSED", signedHoursAgo: 20)],
            minimumHours: 1, now: Self.now
        )
        #expect(hurt.count == 1 && hurt[0].hoursDenied == 50 && hurt[0].notificationType == "SUBSCRIBED")
        #expect(hurt[0].notificationUUIDs.count == 3, "every missed grant of the subscription kept: \(hurt[0].notificationUUIDs)")
    }

    @Test func daysAreTheHoursDeniedInWholeDaysWithinApplesLimits() {
        #expect(CompensationRules.days(hoursDenied: 1, fixed: nil) == 1)
        #expect(CompensationRules.days(hoursDenied: 24, fixed: nil) == 1)
        #expect(CompensationRules.days(hoursDenied: 24.1, fixed: nil) == 2)
        #expect(CompensationRules.days(hoursDenied: 10_000, fixed: nil) == 90)
        #expect(CompensationRules.days(hoursDenied: 30, fixed: 7) == 7)
        #expect(CompensationRules.days(hoursDenied: 0, fixed: nil) == 1)
    }

    @Test func theRequestIdentifierIsTheSameForTheSameWindowOnly() {
        let start = Self.now.addingTimeInterval(-3600)
        let one = CompensationRules.requestIdentifier(bundleId: "a", environment: .production, originalTransactionId: "1", start: start, end: Self.now)
        #expect(one == CompensationRules.requestIdentifier(bundleId: "a", environment: .production, originalTransactionId: "1", start: start, end: Self.now))
        #expect(one != CompensationRules.requestIdentifier(bundleId: "a", environment: .sandbox, originalTransactionId: "1", start: start, end: Self.now))
        #expect(one != CompensationRules.requestIdentifier(bundleId: "a", environment: .production, originalTransactionId: "2", start: start, end: Self.now))
        #expect(one != CompensationRules.requestIdentifier(bundleId: "a", environment: .production, originalTransactionId: "1", start: start.addingTimeInterval(-1), end: Self.now))
        #expect(one.uuidString.count == 36)
    }

    @Test func anExtensionSettledEarlierIsNotSentAndAThirdInAYearIsSkipped() {
        let hurt = CompensationRules.hurt([Self.grant("DID_RENEW", signedHoursAgo: 30)], minimumHours: 1, now: Self.now)[0]
        let id = UUID()
        var settled = RenewalExtensionMachine(
            hurt, history: ExtensionHistory(inLastYear: 0, earlier: RenewalExtensionRecord(originalTransactionId: "1", requestIdentifier: id, extendByDays: 2, reasonCode: 3, outcome: "extended", hoursDenied: 30)),
            requestIdentifier: id, days: 2, dryRun: false
        )
        #expect(settled.start() == .done && settled.report.earlier && settled.report.outcome == "extended")
        var third = RenewalExtensionMachine(hurt, history: ExtensionHistory(inLastYear: 2, earlier: nil), requestIdentifier: id, days: 2, dryRun: false)
        guard case .record(let row) = third.start() else { Issue.record("a skipped row is recorded"); return }
        #expect(row.outcome == "skipped")
        var pending = RenewalExtensionMachine(
            hurt, history: ExtensionHistory(inLastYear: 1, earlier: RenewalExtensionRecord(originalTransactionId: "1", requestIdentifier: id, extendByDays: 2, reasonCode: 3, outcome: "pending", hoursDenied: 30)),
            requestIdentifier: id, days: 2, dryRun: false
        )
        guard case .recordThenSend(_, let request) = pending.start() else { Issue.record("a pending one is sent again"); return }
        #expect(request.requestIdentifier == id.uuidString.lowercased() && request.extendReasonCode == .serviceIssueOrOutage && request.extendByDays == 2)
    }

    @Test func aPendingRequestIsSentAgainAsItWasBeforeAnyOtherRule() {
        let hurt = CompensationRules.hurt([Self.grant("DID_RENEW", signedHoursAgo: 30)], minimumHours: 1, now: Self.now)[0]
        let id = UUID()
        let pending = RenewalExtensionRecord(originalTransactionId: "1", requestIdentifier: id, extendByDays: 5, reasonCode: 3, outcome: "pending", hoursDenied: 30)
        // Even with two extensions counted (its own RENEWAL_EXTENDED may be among them) and days
        // that the rules would set otherwise: the same request, the same days.
        var machine = RenewalExtensionMachine(hurt, history: ExtensionHistory(inLastYear: 2, earlier: pending, compensatedElsewhere: true), requestIdentifier: id, days: 2, dryRun: false)
        guard case .recordThenSend(let row, let request) = machine.start() else { Issue.record("sent again"); return }
        #expect(request.extendByDays == 5 && row.extendByDays == 5 && row.outcome == "pending")
        #expect(machine.sent(AppleCallEnd(.answered(status: 503, code: nil, message: nil, retryable: true))) == .record(RenewalExtensionRecord(
            originalTransactionId: "1", requestIdentifier: id, notificationUUID: hurt.notificationUUID, notificationUUIDs: hurt.notificationUUIDs, extendByDays: 5, reasonCode: 3,
            outcome: "not_sent", hoursDenied: 30, appleStatus: 503,
            detail: "Apple answered HTTP 503 and asked to try again later; the next compensate of this window sends it"
        )))
        #expect(machine.report.needsAPerson)
    }

    @Test func aMissedNotificationAnotherWindowAlreadyMadeGoodIsNotCompensatedTwice() {
        let hurt = CompensationRules.hurt([Self.grant("DID_RENEW", signedHoursAgo: 30)], minimumHours: 1, now: Self.now)[0]
        var machine = RenewalExtensionMachine(hurt, history: ExtensionHistory(inLastYear: 1, earlier: nil, compensatedElsewhere: true), requestIdentifier: UUID(), days: 2, dryRun: false)
        #expect(machine.start() == .done)
        #expect(machine.report.outcome == "skipped" && !machine.report.needsAPerson)
    }

    @Test func aRefusalStaysAProblemOnEveryRunOfTheWindow() {
        let hurt = CompensationRules.hurt([Self.grant("DID_RENEW", signedHoursAgo: 30)], minimumHours: 1, now: Self.now)[0]
        let id = UUID()
        let refused = RenewalExtensionRecord(originalTransactionId: "1", requestIdentifier: id, extendByDays: 2, reasonCode: 3, outcome: "refused", hoursDenied: 30, appleStatus: 403, appleError: 4_030_007)
        var machine = RenewalExtensionMachine(hurt, history: ExtensionHistory(inLastYear: 0, earlier: refused), requestIdentifier: id, days: 2, dryRun: false)
        #expect(machine.start() == .done)
        #expect(machine.report.earlier && machine.report.needsAPerson && machine.report.appleError == 4_030_007)
    }

    @Test func theMassExtensionsFirstStepFollowsWhatAppleTookAndSendsOnlyWhatItDidNot() {
        #expect(MassExtensionStep.first(accepted: nil, complete: nil, dryRun: false) == .send)
        #expect(MassExtensionStep.first(accepted: false, complete: false, dryRun: false) == .send, "recorded, never taken: sent again, the same identifier")
        #expect(MassExtensionStep.first(accepted: true, complete: false, dryRun: false) == .follow)
        #expect(MassExtensionStep.first(accepted: true, complete: true, dryRun: false) == .reportComplete)
        #expect(MassExtensionStep.first(accepted: true, complete: false, dryRun: true) == .list(requestedBefore: true))
        #expect(MassExtensionStep.first(accepted: nil, complete: nil, dryRun: true) == .list(requestedBefore: false))
    }

    @Test func aFamilyMembersShareIsNotSentForAppleExtendsItWithThePurchasers() {
        var grant = Self.grant("DID_RENEW", signedHoursAgo: 30)
        grant.ownershipType = "FAMILY_SHARED"
        let hurt = CompensationRules.hurt([grant], minimumHours: 1, now: Self.now)
        #expect(hurt.count == 1 && hurt[0].ineligible == .familyShared, "listed: it was denied access too")
        var machine = RenewalExtensionMachine(hurt[0], history: ExtensionHistory(inLastYear: 0, earlier: nil), requestIdentifier: UUID(), days: 2, dryRun: false)
        #expect(machine.start() == .done)
        #expect(machine.report.outcome == "skipped" && !machine.report.needsAPerson)
    }

    /// Issue 62, point 4: what Apple refuses by rule is decided from the ledger, skipped with its
    /// rule, never sent, and needs no person (the run does not exit 3 for it).
    @Test func assignedFreeTrialAndNoPaidPeriodAreSkippedWithTheirRuleAndNotSent() {
        let cases: [(String?, String?, Int, ExtensionEligibility?)] = [
            ("PURCHASED", nil, 3, nil), ("PURCHASED", "PAY_AS_YOU_GO", 1, nil), (nil, nil, 1, nil),
            ("ASSIGNED", nil, 3, .assigned), ("FAMILY_SHARED", nil, 3, .familyShared),
            ("PURCHASED", "FREE_TRIAL", 0, .freeOfferPeriod), ("PURCHASED", "FREE_TRIAL", 4, .freeOfferPeriod),
            ("PURCHASED", nil, 0, .noPaidPeriod),
        ]
        for (ownership, offer, paid, expected) in cases {
            #expect(ExtensionEligibility.refusal(.init(ownershipType: ownership, currentOfferDiscountType: offer, paidPeriods: paid)) == expected,
                "\(ownership ?? "nil") \(offer ?? "nil") \(paid)")
            var grant = Self.grant("DID_RENEW", signedHoursAgo: 30)
            grant.ownershipType = ownership
            grant.periods = Self.periods(paid: paid, current: offer)
            let hurt = CompensationRules.hurt([grant], minimumHours: 1, now: Self.now)
            var machine = RenewalExtensionMachine(hurt[0], history: ExtensionHistory(inLastYear: 0, earlier: nil), requestIdentifier: UUID(), days: 2, dryRun: false)
            let action = machine.start()
            if let expected {
                #expect(action == .done && machine.report.outcome == "skipped" && machine.report.rule == expected.rawValue && !machine.report.needsAPerson)
            } else {
                #expect(action != .done, "sent")
            }
        }
        #expect(ExtensionEligibility.assigned.appleError == 4_030_028 && ExtensionEligibility.freeOfferPeriod.appleError == 4_030_004)
    }

    /// `paid` months at 4.99, then the current month, at 0, with the offer `current`.
    static func periods(paid: Int, current: String?) -> [SubscriptionPeriod] {
        let month: TimeInterval = 30 * 86_400
        var periods: [SubscriptionPeriod] = []
        for index in 0..<paid {
            let start = now.addingTimeInterval(Double(index - paid - 1) * month)
            periods.append(SubscriptionPeriod(offerDiscountType: nil, price: 4_990, purchaseDate: start, expiresDate: start.addingTimeInterval(month)))
        }
        periods.append(SubscriptionPeriod(offerDiscountType: current, price: 0, purchaseDate: now.addingTimeInterval(-month / 2), expiresDate: now.addingTimeInterval(month / 2)))
        return periods
    }

    /// The rules' facts from the ledger's periods: the current period is the latest to expire (a
    /// date unknown counts as earliest), a period is paid unless a free trial or of price 0 (an
    /// unknown price counts as paid).
    @Test func theCurrentPeriodAndThePaidOnesAreReadFromTheSubscriptionsPeriods() throws {
        let day: TimeInterval = 86_400
        let trial = SubscriptionPeriod(offerDiscountType: "FREE_TRIAL", price: 0, purchaseDate: Self.now.addingTimeInterval(-10 * day), expiresDate: Self.now.addingTimeInterval(-3 * day))
        let paid = SubscriptionPeriod(offerDiscountType: nil, price: 4_990, purchaseDate: Self.now.addingTimeInterval(-3 * day), expiresDate: Self.now.addingTimeInterval(27 * day))
        let unknown = SubscriptionPeriod(offerDiscountType: "PAY_AS_YOU_GO", price: nil, purchaseDate: nil, expiresDate: nil)
        let free = SubscriptionPeriod(offerDiscountType: nil, price: 0, purchaseDate: Self.now.addingTimeInterval(-40 * day), expiresDate: Self.now.addingTimeInterval(-10 * day))
        #expect(ExtensionEligibility.Facts(ownershipType: "PURCHASED", periods: [paid, trial]) == .init(ownershipType: "PURCHASED", currentOfferDiscountType: nil, paidPeriods: 1))
        #expect(ExtensionEligibility.Facts(ownershipType: nil, periods: [trial, free]) == .init(ownershipType: nil, currentOfferDiscountType: "FREE_TRIAL", paidPeriods: 0))
        #expect(ExtensionEligibility.Facts(ownershipType: nil, periods: [unknown, free]) == .init(ownershipType: nil, currentOfferDiscountType: nil, paidPeriods: 1))
        #expect(ExtensionEligibility.Facts(ownershipType: nil, periods: []) == .init(ownershipType: nil, currentOfferDiscountType: nil, paidPeriods: 0))
        let json = #"[{"offerDiscountType": "FREE_TRIAL", "price": 0, "purchaseDate": 1800000000.5, "expiresDate": null}, {"offerDiscountType": null, "price": 4990, "purchaseDate": null, "expiresDate": null}]"#
        #expect(try SubscriptionPeriod.decode(json: json) == [
            SubscriptionPeriod(offerDiscountType: "FREE_TRIAL", price: 0, purchaseDate: Date(timeIntervalSince1970: 1_800_000_000.5)), SubscriptionPeriod(price: 4_990),
        ])
    }
}

/// Issue 62, point 2: one remedy per outage, decided without I/O.
@Suite("One remedy per outage")
struct RemedyExclusionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static func at(_ hours: Double) -> Date { now.addingTimeInterval(hours * 3600) }

    static func remedy(_ kind: EarlierRemedy.Kind, _ product: String = "p", from: Double? = 0, to: Double? = 6) -> EarlierRemedy {
        EarlierRemedy(kind: kind, productId: product, windowStart: from.map(at), windowEnd: to.map(at), requestedAt: at(10), subscribers: 12, days: 3)
    }

    @Test func theOtherKindOfAnOverlappingWindowExcludesOnlyItsProductAndAgainSendsAnyway() {
        let mass = Self.remedy(.mass)
        #expect(RemedyExclusion.excluding([mass], kind: .perSubscription, productId: "p", start: Self.at(0), end: Self.at(6), again: false) == mass)
        #expect(RemedyExclusion.excluding([mass], kind: .perSubscription, productId: "p", start: Self.at(5), end: Self.at(9), again: false) == mass, "overlapping")
        #expect(RemedyExclusion.excluding([mass], kind: .perSubscription, productId: "p", start: Self.at(6), end: Self.at(9), again: false) == nil, "adjacent: no overlap")
        #expect(RemedyExclusion.excluding([mass], kind: .perSubscription, productId: "q", start: Self.at(0), end: Self.at(6), again: false) == nil, "another product")
        #expect(RemedyExclusion.excluding([mass], kind: .mass, productId: "p", start: Self.at(1), end: Self.at(8), again: false) == mass, "another mass extension of the outage")
        let single = Self.remedy(.perSubscription)
        #expect(RemedyExclusion.excluding([single], kind: .perSubscription, productId: "p", start: Self.at(0), end: Self.at(6), again: false) == nil, "its own repeats are its own rule")
        #expect(RemedyExclusion.excluding([mass], kind: .perSubscription, productId: "p", start: Self.at(0), end: Self.at(6), again: true) == nil)
        #expect(RemedyExclusion.excluding([mass], kind: .perSubscription, productId: nil, start: Self.at(0), end: Self.at(6), again: false) == nil)
        #expect(RemedyExclusion.excluding([single], kind: .mass, productId: "p", start: Self.at(-2), end: Self.at(1), again: false) == single)
        // Kept before migration 0028: no window, so any window overlaps.
        let unknown = Self.remedy(.mass, from: nil, to: nil)
        #expect(RemedyExclusion.excluding([unknown], kind: .perSubscription, productId: "p", start: Self.at(100), end: Self.at(101), again: false) == unknown)
        let detail = RemedyExclusion.detail(mass)
        #expect(detail.contains("mass extension") && detail.contains("12 subscribers") && detail.contains("3 days") && detail.contains("--again"))
    }

    @Test func theMassIntentIsTheOutagesBoundsInMilliseconds() {
        let start = Date(timeIntervalSince1970: 1_764_547_200.0004)
        #expect(CompensationRules.massIntent(start: start, end: start.addingTimeInterval(6 * 3600)) == "1764547200000-1764568800000")
        #expect(CompensationRules.allowedDays == 1...90)
    }

    @Test func theMassRequestIdentifierLeavesTheDaysOut() {
        let one = CompensationRules.massRequestIdentifier(bundleId: "a", environment: .production, productId: "p", intent: "1-2")
        #expect(one == CompensationRules.massRequestIdentifier(bundleId: "a", environment: .production, productId: "p", intent: "1-2"))
        #expect(one != CompensationRules.massRequestIdentifier(bundleId: "a", environment: .production, productId: "q", intent: "1-2"))
        #expect(one != CompensationRules.massRequestIdentifier(bundleId: "a", environment: .production, productId: "p", intent: "1-3"))
    }

    @Test func aSubscriptionTheOtherRemedyMadeGoodIsSkippedAndNeedsAPerson() {
        var grant = CompensationRulesTests.grant("DID_RENEW", signedHoursAgo: 30)
        grant.periods = CompensationRulesTests.periods(paid: 2, current: nil)
        let hurt = CompensationRules.hurt([grant], minimumHours: 1, now: CompensationRulesTests.now)
        var history = ExtensionHistory(inLastYear: 0, earlier: nil)
        history.otherRemedy = RemedyExclusion.detail(Self.remedy(.mass))
        var machine = RenewalExtensionMachine(hurt[0], history: history, requestIdentifier: UUID(), days: 2, dryRun: false)
        #expect(machine.start() == .done)
        #expect(machine.report.outcome == "skipped" && machine.report.rule == "other_remedy" && machine.report.needsAPerson)
    }
}
