import AppStoreServerAPI
import AppStoreSimulator
@testable import Decisions
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

@Suite("Pass 1 end to end: simulator, real Postgres, recovery")
struct RecoveryTests {
    @Test func theRunAppliesExactlyTheMissedNotificationsAndASecondRunAppliesNothing() async throws {
        let harness = try RecoveryHarness()
        let missed = Set(harness.scenario.missedNotifications.map(\.uuid))
        #expect(missed.count > 50, "the scenario misses enough to mean something")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let recovery = try harness.recovery(baseURL, store, url)
                let report = try await recovery.run(.init(window: try harness.window()))

                #expect(try await RecoveryHarness.historyUUIDs(client) == missed, "applied = missed, exactly")
                #expect(report.counts.missed == missed.count)
                #expect(report.counts.alreadyRecorded == harness.scenario.deliveredNotifications.count)
                #expect(report.counts.fetched == harness.scenario.notifications.count)
                #expect(report.counts.rejected == 0)
                #expect(Set(report.missed.map(\.notificationUUID)) == missed)
                try Self.expectTimeline(of: report, matches: harness.scenario)

                let again = try await recovery.run(.init(window: try harness.window()))
                #expect(again.counts.missed == 0)
                #expect(again.counts.applied == 0)
                #expect(again.counts.alreadyRecorded == harness.scenario.notifications.count)
            }
        }
    }

    /// report.html's chart, against the scenario: every notification whose first delivery
    /// attempt failed, by result; every missed one, by type. (A function of its own: inline in
    /// the test's closure it crashed the 6.3.1 compiler's SendNonSendable pass.)
    static func expectTimeline(of report: RecoveryReport, matches scenario: Scenario) throws {
        let timeline = try #require(report.timeline)
        var failedByResult: [String: Int] = [:]
        for notification in scenario.notifications {
            if let first = notification.sendAttempts.first, first.result != "SUCCESS" { failedByResult[first.result, default: 0] += 1 }
        }
        var stepFailures: [String: Int] = [:]
        var stepMissed: [String: Int] = [:]
        for step in timeline.steps {
            stepFailures.merge(step.failedFirstAttempts, uniquingKeysWith: +)
            stepMissed.merge(step.missed, uniquingKeysWith: +)
        }
        #expect(stepFailures == failedByResult && !failedByResult.isEmpty)
        #expect(stepMissed == Dictionary(grouping: scenario.missedNotifications) { $0.type.rawValue }.mapValues(\.count))
        #expect(timeline.outsideFailedFirstAttempts == 0 && timeline.outsideMissed == 0)
    }

    @Test func everySubtypeOfDidRenewAndExpiredIsRecovered() async throws {
        let harness = try RecoveryHarness(customers: 300, seed: 4)
        let missedPairs = Set(harness.scenario.missedNotifications.filter { [.didRenew, .expired].contains($0.type) }.map { "\($0.type)/\($0.subtype?.rawValue ?? "-")" })
        for pair in ["DID_RENEW/-", "DID_RENEW/BILLING_RECOVERY", "EXPIRED/VOLUNTARY", "EXPIRED/BILLING_RETRY", "EXPIRED/PRICE_INCREASE", "EXPIRED/PRODUCT_NOT_FOR_SALE", "EXPIRED/-"] {
            #expect(missedPairs.contains(pair), "the scenario misses a \(pair)")
        }
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                _ = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                var recovered: Set<String> = []
                let rows = try await client.query("SELECT notification_type || '/' || coalesce(subtype, '-') FROM app_store.notifications WHERE source = 'history'")
                for try await pair in rows.decode(String.self) { recovered.insert(pair) }
                #expect(missedPairs.isSubset(of: recovered))
            }
        }
    }

    @Test func aStaleNotificationNeverRegressesASubscription() async throws {
        let harness = try RecoveryHarness()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                #expect(report.counts.stale > 0, "some missed notifications are older than what the server received later")
                // Each subscription holds the state of its newest notification, whatever arrived when.
                var newest: [String: Scenario.Notification] = [:]
                for notification in harness.scenario.notifications where notification.renewalInfo != nil {
                    if (newest[notification.originalTransactionId]?.signedDate ?? .min) <= notification.signedDate {
                        newest[notification.originalTransactionId] = notification
                    }
                }
                let stored = try await store.subscriptions(Array(newest.keys), pair: harness.pair)
                for (customer, notification) in newest {
                    let row = try #require(stored[customer])
                    #expect(row.lastSignedDate.unixMilliseconds == notification.signedDate, "\(customer)")
                    #expect(row.status == notification.status?.rawValue, "\(customer)")
                    #expect(row.autoRenewStatus == notification.renewalInfo?.autoRenewStatus, "\(customer)")
                }
            }
        }
    }

    @Test func aDryRunWritesNothingAndListsExactlyWhatTheRealRunApplies() async throws {
        let harness = try RecoveryHarness(customers: 120, seed: 8)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let before = try await RecoveryHarness.dump(client)
                let recovery = try harness.recovery(baseURL, store, url)
                let dry = try await recovery.run(.init(window: try harness.window(), dryRun: true))
                #expect(try await RecoveryHarness.dump(client) == before, "no row anywhere")
                #expect(dry.run.mode == .dryRun)
                let real = try await recovery.run(.init(window: try harness.window()))
                #expect(dry.missed.map(\.notificationUUID) == real.missed.map(\.notificationUUID))
                #expect(dry.missed.map(\.action) == real.missed.map { $0.action == "applied" ? "would-apply" : "would-apply-stale" })
                #expect(dry.counts.applied == real.counts.applied && dry.counts.stale == real.counts.stale)
                #expect(dry.customers.map(\.originalTransactionId) == real.customers.map(\.originalTransactionId))
            }
        }
    }

    @Test func tamperedPayloadsAreRejectedReportedAndNeverApplied() async throws {
        var options = SimulatorOptions()
        let probe = try RecoveryHarness()
        let tampered = Set(probe.scenario.missedNotifications.prefix(3).map(\.uuid))
        options.tamperedNotifications = tampered
        let harness = try RecoveryHarness(options: options)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                #expect(report.counts.rejected == 3)
                #expect(Set(report.rejected.compactMap(\.notificationUUID)) == tampered)
                #expect(report.rejected.allSatisfy { $0.reason == "bad_signature" })
                #expect(try await RecoveryHarness.historyUUIDs(client).isDisjoint(with: tampered), "never applied")
                var stored: Set<String> = []
                for try await uuid in try await client.query("SELECT notification_uuid FROM app_store.rejected_payloads").decode(String.self) { stored.insert(uuid) }
                #expect(stored == tampered)
            }
        }
    }

    @Test(arguments: [60, 400])
    func historyRequestsStayWithinFivePercentOfTheLowerBound(customers: Int) async throws {
        let harness = try RecoveryHarness(customers: customers, seed: 2)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                let report = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window(), dryRun: true))
                let notifications = harness.scenario.notifications
                let plan = QueryPlan(window: try harness.window(), onlyFailures: false)
                let priorityPages = plan.priorityPairs.map { pair in
                    max(1, (notifications.filter { $0.type == pair.type && $0.subtype == pair.subtype }.count + 19) / 20)
                }.reduce(0, +)
                let bound = (notifications.count + 19) / 20 + priorityPages
                // The bound is what the priority queries and the unfiltered remainder cost.
                #expect(Double(report.counts.apiRequests) <= Double(bound) * 1.05 + 3, "\(report.counts.apiRequests) requests, bound \(bound)")
                #expect(report.run.plan?.remainder == "unfiltered")
                #expect(report.counts.apiRequests == bound)
            }
        }
    }
    @Test func aLargeOutageHoldingANotificationOfATypeThisReleaseDoesNotKnowRecordsIt() async throws {
        // Large: more priority notifications than 20 per remaining documented pair, where one
        // query per documented type would have been the cheaper plan.
        let harness = try RecoveryHarness(customers: 400, seed: 2) { $0.typeAddedLaterNotifications = 3 }
        let added = harness.scenario.notifications.filter { $0.type == Scenario.typeAddedLater }
        try #require(added.count == 3 && added.allSatisfy { !$0.delivered })
        #expect(!NotificationType.documented.contains(Scenario.typeAddedLater))
        let priority = harness.scenario.notifications.filter { [.didRenew, .expired].contains($0.type) }.count
        #expect(priority > 20 * 33, "\(priority) priority notifications")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                let recorded = try await RecoveryHarness.historyUUIDs(client)
                #expect(added.allSatisfy { recorded.contains($0.uuid) }, "every notification of the new type is recorded")
                #expect(report.missed.filter { $0.notificationType == Scenario.typeAddedLater.rawValue }.count == 3)
            }
        }
    }
}

@Suite("A pagination token that expires in the middle of a window")
struct ExpiredTokenTests {
    /// Issue 48, point 2: with `--only-failures`, Apple's retries deliver five notifications of
    /// the list while page 1 is served, then Apple refuses the token of page 2. The query starts
    /// over on a list five places shorter; skipping its first 40 items by position would skip
    /// five notifications never handled. Skipped by notificationUUID, every missed DID_RENEW is
    /// recorded, once.
    @Test func aRestartAfterARefusedTokenSkipsWhatWasHandledSoARetryThatShrinksTheFailuresListLosesNothing() async throws {
        var options = SimulatorOptions()
        options.retriesDeliveredAtPage = 1
        options.retriesDelivered = 5
        options.expireTokenOnceAtPage = 2
        let harness = try RecoveryHarness(customers: 150, seed: 21, options: options)
        let missed = Set(harness.scenario.missedNotifications.filter { $0.type == .didRenew }.map(\.uuid))
        try #require(harness.scenario.missedNotifications.filter { $0.type == .didRenew && $0.subtype == nil }.count > 60, "three pages of the first query")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window(), onlyFailures: true, onlyTypes: [.didRenew]))
                let recorded = try await RecoveryHarness.historyUUIDs(client)
                #expect(missed.subtracting(recorded).isEmpty, "never recorded: \(missed.subtracting(recorded).sorted())")
                #expect(recorded == missed)
                #expect(report.counts.missed == missed.count, "each counted once")
            }
        }
    }

    @Test func theQueryStartsOverAndEveryMissedNotificationIsAppliedOnceAndCountedOnce() async throws {
        var options = SimulatorOptions()
        options.expireTokenOnceAtPage = 3
        let harness = try RecoveryHarness(customers: 150, seed: 21, options: options)
        let missed = Set(harness.scenario.missedNotifications.map(\.uuid))
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let report = try await harness.recovery(baseURL, store, url).run(.init(window: try harness.window()))
                #expect(try await RecoveryHarness.historyUUIDs(client) == missed)
                #expect(report.counts.missed == missed.count)
                #expect(report.counts.fetched == harness.scenario.notifications.count, "restarted pages are not counted twice")
            }
        }
    }
}

/// Issue 48, point 3: Apple keeps 180 days of history (30 in Sandbox) and checks every query's
/// start against its own clock (StartDateTooFarInPastError, 4000012, not retryable). A run is
/// minutes or hours long: the window is checked with a margin, the start moved to it with a
/// warning, and a run that Apple's limit overtakes anyway starts its query over from the new
/// limit instead of failing; an unfinished run of such a window resumes the same way.
@Suite("Apple's retention edge")
struct RetentionEdgeTests {
    static let day: TimeInterval = 86_400

    /// A Sandbox world of 31 days, nearly all of it missed.
    static func harness(_ options: SimulatorOptions = SimulatorOptions()) throws -> RecoveryHarness {
        try RecoveryHarness(customers: 40, seed: 61, outageHours: 29 * 24, options: options) { $0.history = 31 * Self.day }
    }

    @Test func aStartWithinTheMarginIsMovedToItAndOneBeforeTheLimitIsRefusedUnlessResumed() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let limit = now.addingTimeInterval(-30 * Self.day)
        let near = try OutageWindow(start: limit.addingTimeInterval(600), end: now, environment: .sandbox, now: now)
        #expect(near.isClamped && near.start == limit.addingTimeInterval(OutageWindow.retentionMargin))
        #expect(near.requestedStart == limit.addingTimeInterval(600), "checkpoints are kept under the start asked for")
        let clear = try OutageWindow(start: limit.addingTimeInterval(7_200), end: now, environment: .sandbox, now: now)
        #expect(!clear.isClamped && clear.start == clear.requestedStart)
        do {
            _ = try OutageWindow(start: limit.addingTimeInterval(-60), end: now, environment: .sandbox, now: now)
            Issue.record("a start before the limit was accepted")
        } catch let error as WindowError {
            #expect(error.description.contains("use --start \(limit.addingTimeInterval(OutageWindow.retentionMargin).formatted(.iso8601)) or later"))
        }
        let resumed = try OutageWindow(start: limit.addingTimeInterval(-60), end: now, environment: .sandbox, now: now, resuming: true)
        #expect(resumed.start == limit.addingTimeInterval(OutageWindow.retentionMargin) && resumed.isClamped)
        #expect(throws: WindowError.self) {
            try OutageWindow(start: limit.addingTimeInterval(60), end: limit.addingTimeInterval(1_800), environment: .sandbox, now: now)
        }
        // Later in the run, the limit has moved: the start moves with it, never backwards.
        #expect(clear.movedPastRetention(.sandbox, now: now.addingTimeInterval(7_200))?.start == limit.addingTimeInterval(3 * 3_600))
        #expect(clear.movedPastRetention(.sandbox, now: now) == nil)
    }

    /// After five history requests, Apple's clock (and the tool's) is two hours on: the window's
    /// start, 61 minutes inside the limit when the run began, has left Apple's history while the
    /// run paged. The run ends successfully, having recorded every missed notification Apple
    /// still held. (Before: the run failed with StartDateTooFarInPastError, and running it again
    /// was refused.)
    @Test func aRunThatAppleLimitOvertakesStartsTheQueryOverFromTheNewLimitAndRecordsEverythingStillHeld() async throws {
        var options = SimulatorOptions()
        options.historyClockJump = (afterRequests: 5, seconds: 7_200)
        let harness = try Self.harness(options)
        let api = harness.api
        let start = Date().addingTimeInterval(-30 * Self.day + 61 * 60)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                try await harness.seedDeliveredNotifications(store)
                let run = ReconciliationRun(
                    client: try harness.client(baseURL), verifier: try harness.verifier(), store: store, databaseURL: url, logger: harness.logger,
                    now: { Date().addingTimeInterval(api.clockAhead) }
                )
                let result = try await run.execute(.init(kind: .run, window: .fixed(start: start, end: Date()), mode: .apply, repair: false))
                let moved = try #require(result.passOne?.startMovedTo, "Apple's limit overtook the start (\(api.requestCounts) requests)")
                // Moved once, to Apple's limit after the jump plus the margin: never past what the limit is by the run's end.
                #expect(moved.timeIntervalSince(start) > 7_000)
                #expect(moved <= OutageWindow.earliestStart(.sandbox, now: Date().addingTimeInterval(api.clockAhead)))
                let stillHeld = Set(harness.scenario.missedNotifications.filter { $0.signedDate >= moved.unixMilliseconds }.map(\.uuid))
                #expect(stillHeld.count > 50)
                let recorded = try await RecoveryHarness.historyUUIDs(client)
                #expect(stillHeld.subtracting(recorded).isEmpty, "\(stillHeld.subtracting(recorded).count) still held by Apple, never recorded")
            }
        }
    }

    /// A run of a window whose start Apple's limit has overtaken since it began (its checkpoints
    /// in the ledger) resumes, clamped; the same window without an unfinished run is refused.
    @Test func anUnfinishedRunOfAWindowTheLimitOvertookResumesClampedInsteadOfBeingRefused() async throws {
        let harness = try Self.harness()
        let start = Date().addingTimeInterval(-30 * Self.day + 61 * 60)
        let end = Date()
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                let store = LedgerStore(client: client, logger: harness.logger)
                let later = ReconciliationRun(
                    client: try harness.client(baseURL), verifier: try harness.verifier(), store: store, databaseURL: url, logger: harness.logger,
                    now: { Date().addingTimeInterval(2 * 3_600) }
                )
                let request = ReconciliationRun.Request(kind: .run, window: .fixed(start: start, end: end), mode: .apply, repair: false)
                await #expect(throws: WindowError.self) { try await later.execute(request) }
                // The first attempt, begun two hours earlier, left a checkpoint and died.
                let first = try OutageWindow(start: start, end: end, environment: .sandbox)
                let scope = NotificationRecovery.Options(window: first).checkpointScope(harness.pair)
                let runId = try await store.startRun(kind: .run, pair: harness.pair, windowStart: first.start, windowEnd: first.end)
                try await store.saveCheckpoint(QueryCheckpoint(query: "DID_RENEW/-", position: 0, paginationToken: nil, completed: false), in: scope, runId: runId)
                let result = try await later.execute(request)
                let window = try #require(result.passOne?.window)
                #expect(window.isClamped && window.requestedStart.unixMilliseconds == start.unixMilliseconds)
                #expect(window.start > start)
                #expect(result.passOne?.resumed != nil, "the unfinished run's checkpoints were taken over")
            }
        }
    }
}
