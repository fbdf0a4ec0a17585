import AppStoreServerAPI
@testable import Decisions
import Foundation
import Ledger
import Reconciliation
import SignedData
import Testing

/// The decisions of pass 1, as pure values: no server, no database.
@Suite("Recovery planner and query plan, without I/O")
struct PlannerTests {
    static func notification(_ uuid: String, signedDate: Int64, status: SubscriptionStatus = .active, customer: String = "1000", type: NotificationType = .didRenew, subtype: NotificationSubtype? = nil) -> RecoveryPlanner.Input {
        var transaction = TransactionPayload(transactionId: "\(customer)-\(signedDate)", originalTransactionId: customer)
        transaction.signedDate = signedDate
        transaction.expiresDate = signedDate + 86_400_000
        transaction.type = .autoRenewable
        transaction.productId = "monthly"
        var renewal = RenewalInfoPayload(originalTransactionId: customer)
        renewal.autoRenewStatus = status == .expired ? 0 : 1
        let payload = NotificationPayload(
            notificationType: type, subtype: subtype, notificationUUID: uuid, signedDate: signedDate,
            data: NotificationData(environment: .sandbox, signedTransactionInfo: "signed-\(uuid)", signedRenewalInfo: "r", status: status)
        )
        return .init(
            item: NotificationHistoryItem(signedPayload: "x.y.z", sendAttempts: [SendAttempt(attemptDate: signedDate + 1000, sendAttemptResult: .timedOut)]),
            outcome: .verified(VerifiedNotification(payload: payload, transaction: transaction, renewalInfo: renewal))
        )
    }

    static let uuidA = "6a0c8f1e-0000-4000-8000-00000000000a"
    static let uuidB = "6a0c8f1e-0000-4000-8000-00000000000b"

    @Test func aNotificationTheLedgerHoldsIsAlreadyRecordedAndWritesNothing() {
        var ledger = RecoveryPlanner.LedgerSnapshot()
        ledger.existingNotifications = [UUID(uuidString: Self.uuidA)!]
        var memory = RecoveryPlanner.RunMemory()
        let plan = RecoveryPlanner.plan([Self.notification(Self.uuidA, signedDate: 1_000)], ledger: ledger, memory: &memory)
        #expect(plan.decisions.map(\.action) == [.alreadyRecorded])
        #expect(plan.batch.isEmpty)
    }

    @Test func aMissedNotificationWritesItsRowItsTransactionAndTheSubscription() {
        var memory = RecoveryPlanner.RunMemory()
        let plan = RecoveryPlanner.plan([Self.notification(Self.uuidA, signedDate: 5_000)], ledger: .init(), memory: &memory)
        #expect(plan.decisions.map(\.action) == [.applied])
        #expect(plan.batch.notifications.map(\.source) == [.history])
        #expect(plan.batch.transactions.map(\.transactionId) == ["1000-5000"])
        #expect(plan.batch.subscriptions.first?.lastSignedDate.unixMilliseconds == 5_000)
        #expect(plan.batch.subscriptions.first?.status == 1)
        #expect(memory.subscriptionsBefore["1000"] == .some(nil), "the customer had no row before")
    }

    @Test func aRefundCarryingAnOlderTransactionDoesNotMoveTheExpiryOrProductBack() {
        var ledger = RecoveryPlanner.LedgerSnapshot()
        let storedExpiry = Date(timeIntervalSince1970: 1_000_000)
        ledger.subscriptions["1000"] = SubscriptionRecord(
            originalTransactionId: "1000", productId: "yearly", status: 1, expiresDate: storedExpiry, autoRenewStatus: 1,
            autoRenewProductId: "yearly", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 100)
        )
        var memory = RecoveryPlanner.RunMemory()
        // Signed after the stored state, about an earlier period: its transaction expired at 86,600 s.
        let refund = Self.notification(Self.uuidA, signedDate: 200_000, status: .active, type: .refund)
        let plan = RecoveryPlanner.plan([refund], ledger: ledger, memory: &memory)
        #expect(plan.decisions.map(\.action) == [.applied])
        #expect(plan.batch.subscriptions.count == 1)
        let row = plan.batch.subscriptions.first
        #expect(row?.expiresDate == storedExpiry, "never backwards")
        #expect(row?.productId == "yearly")
        #expect(row?.lastSignedDate.unixMilliseconds == 200_000, "the notification still applies")
        #expect(plan.batch.transactions.map(\.transactionId) == ["1000-200000"], "its transaction is recorded")
    }

    @Test func aMissedNotificationOlderThanTheStoredStateIsRecordedButStale() {
        var ledger = RecoveryPlanner.LedgerSnapshot()
        ledger.subscriptions["1000"] = SubscriptionRecord(
            originalTransactionId: "1000", productId: "monthly", status: 5, expiresDate: nil, autoRenewStatus: 0,
            autoRenewProductId: nil, isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 9)
        )
        var memory = RecoveryPlanner.RunMemory()
        // A late DID_RENEW (signed at 5 s) must not undo a REFUND recorded at 9 s.
        let plan = RecoveryPlanner.plan([Self.notification(Self.uuidA, signedDate: 5_000)], ledger: ledger, memory: &memory)
        #expect(plan.decisions.map(\.action) == [.stale])
        #expect(plan.batch.notifications.count == 1, "recorded all the same")
        #expect(plan.batch.subscriptions.isEmpty, "state unchanged")
    }

    /// A late notification older than the row, whose renewal info is newer than the row's (the
    /// row's latest notification had none): the row takes that renewal info and nothing else.
    @Test func anOlderNotificationWithNewerRenewalInfoUpdatesOnlyTheRenewalFields() {
        var ledger = RecoveryPlanner.LedgerSnapshot()
        var stored = SubscriptionRecord(
            originalTransactionId: "1000", productId: "yearly", status: 1, expiresDate: Date(timeIntervalSince1970: 50), autoRenewStatus: 1,
            autoRenewProductId: "yearly", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 9)
        )
        stored.renewalSignedDate = Date(timeIntervalSince1970: 3)
        ledger.subscriptions["1000"] = stored
        var memory = RecoveryPlanner.RunMemory()
        // Signed at 5 s, auto-renew off (an expired status gives autoRenewStatus 0 here).
        let plan = RecoveryPlanner.plan([Self.notification(Self.uuidA, signedDate: 5_000, status: .expired)], ledger: ledger, memory: &memory)
        #expect(plan.decisions.map(\.action) == [.applied])
        let row = plan.batch.subscriptions.first
        #expect(row?.autoRenewStatus == 0, "the newer renewal info")
        #expect(row?.renewalSignedDate?.unixMilliseconds == 5_000)
        #expect(row?.status == 1 && row?.productId == "yearly" && row?.expiresDate == stored.expiresDate, "the rest as the row had it")
        #expect(row?.lastSignedDate.unixMilliseconds == 9_000, "the row stays as of its latest notification")
    }

    /// The same notification when the row's renewal info is as new as the row (or has no
    /// renewal signing time, written before migration 0019): stale, nothing written.
    @Test(arguments: [9.0, nil])
    func anOlderNotificationWhoseRenewalInfoIsNotNewerIsStale(renewalSeconds: Double?) {
        var ledger = RecoveryPlanner.LedgerSnapshot()
        var stored = SubscriptionRecord(
            originalTransactionId: "1000", productId: "yearly", status: 1, expiresDate: nil, autoRenewStatus: 1,
            autoRenewProductId: "yearly", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 9)
        )
        stored.renewalSignedDate = renewalSeconds.map { Date(timeIntervalSince1970: $0) }
        ledger.subscriptions["1000"] = stored
        var memory = RecoveryPlanner.RunMemory()
        let plan = RecoveryPlanner.plan([Self.notification(Self.uuidA, signedDate: 5_000, status: .expired)], ledger: ledger, memory: &memory)
        #expect(plan.decisions.map(\.action) == [.stale])
        #expect(plan.batch.subscriptions.isEmpty)
    }

    /// A newer notification whose renewal info was signed before the row's: the row moves on,
    /// but keeps its renewal fields.
    @Test func aNewerNotificationWithOlderRenewalInfoKeepsTheRowsRenewalFields() {
        var ledger = RecoveryPlanner.LedgerSnapshot()
        var stored = SubscriptionRecord(
            originalTransactionId: "1000", productId: "monthly", status: 1, expiresDate: nil, autoRenewStatus: 0,
            autoRenewProductId: "monthly", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 4)
        )
        stored.renewalSignedDate = Date(timeIntervalSince1970: 4)
        ledger.subscriptions["1000"] = stored
        var memory = RecoveryPlanner.RunMemory()
        var input = Self.notification(Self.uuidA, signedDate: 5_000, status: .active)
        if case .verified(var notification) = input.outcome {
            notification.renewalInfo?.signedDate = 3_000
            input.outcome = .verified(notification)
        }
        let plan = RecoveryPlanner.plan([input], ledger: ledger, memory: &memory)
        #expect(plan.decisions.map(\.action) == [.applied])
        let row = plan.batch.subscriptions.first
        #expect(row?.lastSignedDate.unixMilliseconds == 5_000)
        #expect(row?.autoRenewStatus == 0, "renewal info signed at 3 s does not replace the row's from 4 s")
        #expect(row?.renewalSignedDate?.unixMilliseconds == 4_000)
    }

    @Test func withinAPageTheNewerNotificationWinsWhateverTheOrder() {
        var memory = RecoveryPlanner.RunMemory()
        let newer = Self.notification(Self.uuidB, signedDate: 9_000, status: .expired)
        let older = Self.notification(Self.uuidA, signedDate: 5_000, status: .active)
        let plan = RecoveryPlanner.plan([newer, older], ledger: .init(), memory: &memory)
        #expect(plan.batch.subscriptions.count == 1)
        #expect(plan.batch.subscriptions.first?.status == 2)
        #expect(plan.batch.subscriptions.first?.lastSignedDate.unixMilliseconds == 9_000)
        #expect(Set(plan.decisions.map(\.action)) == [.applied])
    }

    /// A real run starts the next page's ledger read while this page is written, so the read may
    /// or may not see this page. Carrying the memory of this page alone, the next page plans the
    /// same either way, and the same as after a read that waited for the write.
    @Test func theNextPagePlansTheSameWhetherItsLedgerReadSawThePreviousPageOrNot() {
        let uuidC = "6a0c8f1e-0000-4000-8000-00000000000c"
        let uuidD = "6a0c8f1e-0000-4000-8000-00000000000d"
        let uuidE = "6a0c8f1e-0000-4000-8000-00000000000e"
        var memory = RecoveryPlanner.RunMemory()
        // An earlier page (customer 3000), then this page (customers 1000 and 2000).
        _ = RecoveryPlanner.plan([Self.notification(uuidE, signedDate: 500, customer: "3000")], ledger: .init(), memory: &memory)
        let thisPage = RecoveryPlanner.plan(
            [Self.notification(Self.uuidA, signedDate: 5_000, customer: "1000"), Self.notification(Self.uuidB, signedDate: 6_000, customer: "2000")],
            ledger: .init(), memory: &memory
        )
        let carried = memory.keeping(only: thisPage.batch)
        #expect(carried.subscriptions.keys.sorted() == ["1000", "2000"], "the earlier page's customer is left to the ledger")
        #expect(carried.appliedNotifications == [UUID(uuidString: Self.uuidA)!, UUID(uuidString: Self.uuidB)!])

        var afterThisPage = RecoveryPlanner.LedgerSnapshot()
        afterThisPage.existingNotifications = Set(thisPage.batch.notifications.map(\.notificationUUID))
        for subscription in thisPage.batch.subscriptions { afterThisPage.subscriptions[subscription.originalTransactionId] = subscription }
        for transaction in thisPage.batch.transactions { afterThisPage.transactionSignedDates[transaction.transactionId] = transaction.signedDate }

        // The next page: A again, an older one for 1000 (stale), a newer one for 2000 (applied).
        let nextPage = [
            Self.notification(Self.uuidA, signedDate: 5_000, customer: "1000"),
            Self.notification(uuidC, signedDate: 4_000, customer: "1000"),
            Self.notification(uuidD, signedDate: 9_000, status: .expired, customer: "2000"),
        ]
        var beforeWrite = carried
        let readBeforeWrite = RecoveryPlanner.plan(nextPage, ledger: .init(), memory: &beforeWrite)
        var afterWrite = carried
        let readAfterWrite = RecoveryPlanner.plan(nextPage, ledger: afterThisPage, memory: &afterWrite)
        var fresh = RecoveryPlanner.RunMemory()
        let waited = RecoveryPlanner.plan(nextPage, ledger: afterThisPage, memory: &fresh)
        #expect(readBeforeWrite.decisions.map(\.action) == [.stale, .alreadyRecorded, .applied])
        for plan in [readAfterWrite, waited] {
            #expect(plan.decisions.map(\.action) == readBeforeWrite.decisions.map(\.action))
            #expect(plan.batch.notifications == readBeforeWrite.batch.notifications)
            #expect(plan.batch.transactions == readBeforeWrite.batch.transactions)
            #expect(plan.batch.subscriptions == readBeforeWrite.batch.subscriptions)
        }
    }

    @Test func laterPagesSeeWhatEarlierPagesDecidedEvenInADryRun() {
        var memory = RecoveryPlanner.RunMemory()
        _ = RecoveryPlanner.plan([Self.notification(Self.uuidB, signedDate: 9_000, status: .expired)], ledger: .init(), memory: &memory)
        let second = RecoveryPlanner.plan([Self.notification(Self.uuidA, signedDate: 5_000)], ledger: .init(), memory: &memory)
        #expect(second.decisions.map(\.action) == [.stale])
        let repeatPage = RecoveryPlanner.plan([Self.notification(Self.uuidB, signedDate: 9_000)], ledger: .init(), memory: &memory)
        #expect(repeatPage.decisions.map(\.action) == [.alreadyRecorded])
    }

    @Test func aRejectedPayloadIsRecordedAsRejectedAndNothingElse() {
        var memory = RecoveryPlanner.RunMemory()
        let input = RecoveryPlanner.Input(
            item: NotificationHistoryItem(signedPayload: "not.a.jws", sendAttempts: nil),
            outcome: .rejected(Rejection(.badSignature, "altered"))
        )
        let plan = RecoveryPlanner.plan([input], ledger: .init(), memory: &memory)
        #expect(plan.decisions.map(\.action) == [.rejected])
        #expect(plan.batch.rejected.map(\.reason) == ["bad_signature"])
        #expect(plan.batch.notifications.isEmpty && plan.batch.subscriptions.isEmpty && plan.batch.transactions.isEmpty)
    }

    @Test func thePriorityQueriesAskForEachSubtypeOfDidRenewAndExpiredSeparatelyThenConsumptionRequests() throws {
        let window = try OutageWindow(start: Date().addingTimeInterval(-7200), end: Date(), environment: .sandbox)
        let plan = QueryPlan(window: window, onlyFailures: false)
        #expect(plan.priorityQueries.map(\.description) == [
            "DID_RENEW (no subtype)", "DID_RENEW/BILLING_RECOVERY", "EXPIRED (no subtype)", "EXPIRED/VOLUNTARY",
            "EXPIRED/BILLING_RETRY", "EXPIRED/PRICE_INCREASE", "EXPIRED/PRODUCT_NOT_FOR_SALE", "CONSUMPTION_REQUEST (no subtype)",
        ])
        let requests = plan.priorityQueries.map { plan.request(for: $0) }
        #expect(requests.allSatisfy { $0.onlyFailures == nil && $0.startDate == window.startMilliseconds })
        #expect(QueryPlan(window: window, onlyFailures: true).request(for: plan.priorityQueries[0]).onlyFailures == true)
    }

    @Test func theRemainderIsAlwaysOneUnfilteredPassSkippingOnlyThePriorityPairs() throws {
        let plan = QueryPlan(window: try OutageWindow(start: Date().addingTimeInterval(-7200), end: Date(), environment: .sandbox), onlyFailures: false)
        let remainder = plan.remainderQuery
        #expect(remainder.type == nil && remainder.subtype == nil, "unfiltered: it sees types this release does not know")
        #expect(remainder.skipping == Set(plan.priorityPairs) && remainder.skipping.count == 8)
        #expect(plan.request(for: remainder).notificationType == nil)
    }

    @Test func aRefundRequestAboutAnUpgradedFromAnnualPlanLeavesProductAndExpiryAsTheyWere() {
        // The row: the monthly plan the customer upgraded to, expiring in a month.
        var ledger = RecoveryPlanner.LedgerSnapshot()
        let monthlyExpiry = Date(timeIntervalSince1970: 1_802_592_000)
        ledger.subscriptions["1000"] = SubscriptionRecord(
            originalTransactionId: "1000", productId: "premium.monthly", status: 1, expiresDate: monthlyExpiry, autoRenewStatus: 1,
            autoRenewProductId: "premium.monthly", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: Date(timeIntervalSince1970: 1_800_000_000)
        )
        // A CONSUMPTION_REQUEST, then a REFUND_DECLINED, about the annual plan upgraded from: it
        // expires next year, later than the current plan.
        for type in [NotificationType.consumptionRequest, .refundDeclined, .refund] {
            var input = Self.notification(Self.uuidA, signedDate: 1_800_100_000_000, status: .active, type: type)
            guard case .verified(var verified) = input.outcome else { Issue.record("not verified"); return }
            verified.transaction?.productId = "basic.annual"
            verified.transaction?.isUpgraded = true
            verified.transaction?.expiresDate = 1_831_000_000_000
            input.outcome = .verified(verified)
            var memory = RecoveryPlanner.RunMemory()
            let plan = RecoveryPlanner.plan([input], ledger: ledger, memory: &memory)
            let row = plan.batch.subscriptions.first
            #expect(row?.productId == "premium.monthly", "\(type)")
            #expect(row?.expiresDate == monthlyExpiry, "\(type)")
            #expect(row?.lastSignedDate.unixMilliseconds == 1_800_100_000_000, "its status and renewal info still apply")
            #expect(plan.batch.transactions.first?.isUpgraded == true, "the transaction itself is recorded as Apple signed it")
        }
    }
}

@Suite("The outage window")
struct OutageWindowTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func timesParseAsISO8601WithAnOffsetOrAsMilliseconds() throws {
        #expect(try OutageWindow.parseTime("2026-11-18T02:00:00Z") == Date(timeIntervalSince1970: 1_794_967_200))
        #expect(try OutageWindow.parseTime("2026-11-18T03:00:00+01:00") == Date(timeIntervalSince1970: 1_794_967_200))
        #expect(try OutageWindow.parseTime("2026-11-18T02:00:00.500Z").unixMilliseconds == 1_794_967_200_500)
        #expect(try OutageWindow.parseTime("1794967200000") == Date(timeIntervalSince1970: 1_794_967_200))
        #expect(throws: WindowError.self) { try OutageWindow.parseTime("yesterday") }
        #expect(throws: WindowError.self) { try OutageWindow.parseTime("2026-11-18") }
    }

    @Test func reversedEmptyAndTooOldWindowsAreRefusedWithWhatIsAllowed() {
        #expect(throws: WindowError.self) { try OutageWindow(start: now, end: now, environment: .production, now: now.addingTimeInterval(10)) }
        #expect(throws: WindowError.self) { try OutageWindow(start: now, end: now.addingTimeInterval(-5), environment: .production, now: now.addingTimeInterval(10)) }
        do {
            _ = try OutageWindow(start: now.addingTimeInterval(-31 * 86_400), end: now, environment: .sandbox, now: now)
            Issue.record("a sandbox window older than 30 days was accepted")
        } catch let error as WindowError {
            #expect(error.description.contains("30 days"))
        } catch {
            Issue.record("\(error)")
        }
        #expect(throws: Never.self) { try OutageWindow(start: now.addingTimeInterval(-179 * 86_400), end: now, environment: .production, now: now) }
    }

    @Test func aFutureEndIsClampedToNow() throws {
        let window = try OutageWindow(start: now.addingTimeInterval(-3600), end: now.addingTimeInterval(3600), environment: .production, now: now)
        #expect(window.end == now)
    }
}

@Suite("The nightly window")
struct NightlyWindowTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func afterASuccessItStartsAtThatWindowsEndLessTheOverlapAndEndsBeforeNow() throws {
        let lastEnd = now.addingTimeInterval(-86_400)
        let window = try NightlyWindow.choose(lastSuccessfulWindowEnd: lastEnd, firstStart: nil, now: now, overlap: 7200, settle: 300, environment: .production)
        #expect(window.start == lastEnd.addingTimeInterval(-7200))
        #expect(window.end == now.addingTimeInterval(-300))
    }

    @Test func theFirstRunNeedsAStartAndAfterALongPauseItStopsAtTheRetentionLimit() throws {
        #expect(throws: WindowError.self) {
            try NightlyWindow.choose(lastSuccessfulWindowEnd: nil, firstStart: nil, now: now, overlap: 7200, settle: 300, environment: .sandbox)
        }
        let first = try NightlyWindow.choose(lastSuccessfulWindowEnd: nil, firstStart: now.addingTimeInterval(-3 * 86_400), now: now, overlap: 7200, settle: 300, environment: .sandbox)
        #expect(first.start == now.addingTimeInterval(-3 * 86_400))
        let longAgo = try NightlyWindow.choose(lastSuccessfulWindowEnd: now.addingTimeInterval(-90 * 86_400), firstStart: nil, now: now, overlap: 7200, settle: 300, environment: .sandbox)
        #expect(longAgo.start == now.addingTimeInterval(-30 * 86_400 + 3600), "never before what history keeps")
    }
}
