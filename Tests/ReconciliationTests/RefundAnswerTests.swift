import AppStoreServerAPI
import AppStoreSimulator
import Decisions
import FailureKind
import Foundation
import Ledger
import LedgerModel
import PostgresNIO
import Reconciliation
import RemedyDecisions
import RunResults
import SignedData
import TestSupport
import Testing

/// `consumption-requests --answer` (issue 50): the hourly check records the refund requests the
/// server missed, then answers every open one with Send Consumption Information from the team's
/// facts query, against the simulated App Store (which validates as Apple documents, repeats
/// requests while unanswered and declines some after an answer) and a real PostgreSQL.
@Suite("Answering refund requests: consumption-requests --answer")
struct RefundAnswerTests {
    /// The team's own table of facts, and the query that maps it to the contract's columns.
    static let factsTable = """
        CREATE TABLE public.team_refund_facts (
            transaction_id text PRIMARY KEY, consented boolean, delivery text, sample boolean, consumed integer, preference text,
            slow boolean NOT NULL DEFAULT false
        )
        """

    static let factsQuery = """
        -- The team's facts about one purchase.
        SELECT consented AS customer_consented, delivery AS delivery_status, sample AS sample_content_provided,
            consumed AS consumption_percentage, preference AS refund_preference
        FROM public.team_refund_facts
        WHERE transaction_id = $1 AND (NOT slow OR (SELECT true FROM pg_sleep(3)));
        """

    /// A world, its simulator serving, a fresh ledger with the team's table, and a check to run.
    struct Setup: Sendable {
        let harness: RecoveryHarness
        let client: PostgresClient
        let store: LedgerStore
        let url: DatabaseURL
        let apiClient: AppStoreServerAPIClient

        /// Transaction IDs of `count` accounts' purchases of `type` (none shared through Family
        /// Sharing: Apple refuses answers about those).
        func transactions(_ count: Int, type: ProductType) throws -> [String] {
            let found = harness.scenario.customers.compactMap { customer in
                customer.purchases.first { $0.latestTransaction.type == type && $0.latestTransaction.inAppOwnershipType != "FAMILY_SHARED" }?
                    .latestTransaction.transactionId
            }
            try #require(found.count >= count, "the world has \(count) purchases of \(type.rawValue)")
            return Array(found.prefix(count))
        }

        /// A row of the team's table.
        func facts(_ transactionId: String, consented: Bool?, delivery: String?, sample: Bool?, consumed: Int? = nil, preference: String? = nil, slow: Bool = false) async throws {
            try await client.query(
                """
                INSERT INTO public.team_refund_facts VALUES (\(transactionId), \(consented), \(delivery), \(sample), \(consumed.map(Int32.init)), \(preference), \(slow))
                """,
                logger: harness.logger
            )
        }

        /// The hourly check as the command runs it, answering with `facts` (nil: not answering).
        func check(facts: String? = factsQuery, timeout: Duration = .seconds(5), dryRun: Bool = false) async throws -> RunResult {
            let run = ReconciliationRun(client: apiClient, verifier: try harness.verifier(), store: store, databaseURL: url, logger: harness.logger)
            return try await run.execute(
                .init(
                    kind: .consumptionRequests, window: .nightly(firstStart: Date().addingTimeInterval(-4 * 3600), overlap: 3600, settle: 0),
                    mode: dryRun ? .dryRun : .apply, repair: false, onlyTypes: [.consumptionRequest, .refund, .refundDeclined],
                    answering: try facts.map { .init(query: try RefundFactsQuery(file: "refund-facts.sql", text: $0), timeout: timeout) }
                )
            )
        }

        /// Answers Apple took for this transaction.
        func taken(_ transactionId: String) -> [SimulatedAPI.ConsumptionAnswerTaken] {
            harness.api.consumptionAnswers.filter { $0.transactionId == transactionId }
        }

        func count(_ sql: String) async throws -> Int { try await BackendLedgerTests.count(client, sql) }
    }

    static func withSetup(
        seed: UInt64, configure: (inout Scenario.Configuration) -> Void = { _ in }, _ body: @Sendable (Setup) async throws -> Void
    ) async throws {
        let harness = try RecoveryHarness(customers: 80, seed: seed, outageHours: 30, configure: configure)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await TestDatabase.withFreshLedger { client, url in
                try await client.query(PostgresQuery(unsafeSQL: factsTable), logger: harness.logger)
                let store = LedgerStore(client: client, logger: harness.logger)
                try await body(Setup(harness: harness, client: client, store: store, url: url, apiClient: try harness.client(baseURL)))
            }
        }
    }

    /// Two hours ago, while the server was down: a refund request and its repeats.
    static let asked = Date().addingTimeInterval(-2 * 3600)

    func answer(_ result: RunResult, _ transactionId: String) throws -> RefundAnswerReport {
        try #require(result.answers?.answers.first { $0.transactionId == transactionId }, "an answer for \(transactionId): \(String(describing: result.answers))")
    }

    @Test func repeatedRequestsAreAnsweredOnceEveryRowOfTheRequestAnsweredAndASecondCheckSendsNothing() async throws {
        try await Self.withSetup(seed: 501) { setup in
            let ids = try setup.transactions(2, type: .consumable)
            // ids[0]: facts Apple does not decide on at once; ids[1]: DECLINE, which the simulated
            // Apple declines right after the answer.
            // Three requests an hour apart (closer than Apple's 8 hours, so that all three fall in
            // the run's four-hour window).
            let firstAsked = Date().addingTimeInterval(-3.5 * 3600)
            let requests = try setup.harness.api.requestRefund(transactionId: ids[0], at: firstAsked, repeats: 2, every: 3600)
            try setup.harness.api.requestRefund(transactionId: ids[1], at: firstAsked, repeats: 2, every: 3600)
            try await setup.facts(ids[0], consented: true, delivery: "DELIVERED", sample: false, consumed: 20_000, preference: "GRANT_FULL")
            try await setup.facts(ids[1], consented: true, delivery: "DELIVERED", sample: false, consumed: 80_000, preference: "DECLINE")
            let first = try await setup.check()
            #expect(first.outcome == .succeeded)
            let sent = try answer(first, ids[0])
            #expect(sent.outcome == "sent" && sent.appleStatus == 202, "\(sent)")
            #expect(sent.sent == ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 20_000, refundPreference: .grantFull))
            #expect(try answer(first, ids[1]).outcome == "sent")
            #expect(ids.allSatisfy { setup.taken($0).count == 1 }, "three CONSUMPTION_REQUESTs each, one answer each")
            #expect(first.answers?.requestsToApple == 2)
            #expect(try await setup.count("SELECT count(*) FROM app_store.notifications WHERE notification_uuid::text IN ('\(requests.map(\.uuid).joined(separator: "','"))')") == 3)
            let rows = try await setup.count("SELECT count(*) FROM app_store.consumption_requests WHERE transaction_id = '\(ids[0])'")
            #expect(rows >= 1 && sent.requestsAnswered == rows, "every row of the request answered: \(sent.requestsAnswered) of \(rows)")
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_requests WHERE transaction_id = '\(ids[0])' AND answered_date IS NULL") == 0)
            let kept = try await setup.store.consumptionAnswers(pair: setup.harness.pair, transactionId: ids[0])
            #expect(kept.map(\.row.outcome) == ["sent"] && kept.first?.row.appleStatus == 202, "one row, Apple's answer over the trace: \(kept)")
            #expect(kept.first?.row.sent?.contains("\"refundPreference\": \"GRANT_FULL\"") == true)
            // The next check sends nothing: one request answered, the other declined by Apple
            // after its answer (the decision recorded now).
            let second = try await setup.check()
            #expect(second.answers?.answers.contains { ids.contains($0.transactionId) } == false, "\(String(describing: second.answers))")
            #expect(ids.allSatisfy { setup.taken($0).count == 1 })
            #expect(
                try await setup.count("SELECT count(*) FROM app_store.notifications WHERE transaction_id = '\(ids[1])' AND notification_type = 'REFUND_DECLINED'") == 1,
                "Apple's decision after the answer, recorded"
            )
        }
    }

    /// Issue 62, point 5: Apple asks again every few hours while a refund request is open, each
    /// request to be answered within 12 hours. A request first sent 20 hours ago (received by the
    /// live server then, unanswered) and repeated 2 hours ago (during an outage) is answerable
    /// until 10 hours from now: answered once; the episode's row keeps when Apple first asked.
    @Test func aRequestFirstSentTwentyHoursAgoAndRepeatedTwoHoursAgoIsAnsweredOnce() async throws {
        try await Self.withSetup(seed: 509) { setup in
            let transaction = try setup.transactions(1, type: .consumable)[0]
            let first = try setup.harness.api.requestRefund(transactionId: transaction, at: Date().addingTimeInterval(-20 * 3600))
            let ingest = NotificationIngest(verifier: try setup.harness.verifier(), store: setup.store)
            #expect(try await ingest.ingest(signedPayloads: try first.map { try setup.harness.api.signNotification($0) }) == 1)
            try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
            try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: false, consumed: 10_000)
            let result = try await setup.check()
            #expect(try answer(result, transaction).outcome == "sent")
            #expect(setup.taken(transaction).count == 1)
            // The row: the latest request's deadline, the first request's send.
            let hoursLeft = try await setup.count(
                "SELECT round(extract(epoch FROM deadline_date - now()) / 3600)::integer FROM app_store.consumption_requests WHERE transaction_id = '\(transaction)'")
            #expect(hoursLeft == 10, "due 12 h after the latest request: \(hoursLeft) h left")
            let firstAsked = try await setup.count(
                "SELECT round(extract(epoch FROM now() - first_sent_date) / 3600)::integer FROM app_store.consumption_requests WHERE transaction_id = '\(transaction)'")
            #expect(firstAsked == 20)
            let second = try await setup.check()
            #expect(setup.taken(transaction).count == 1, "answered once: \(String(describing: second.answers))")
        }
    }

    /// Issue 62, point 4: a refund request about a family member's share is listed as
    /// not_supported, never sent (Apple answers 4000185), and the check succeeds.
    @Test func aRequestAboutAFamilyMembersShareIsNotSupportedNotSentAndNoProblem() async throws {
        try await Self.withSetup(seed: 510) { setup in
            let sharedIds = setup.harness.scenario.customers.compactMap { customer -> String? in
                customer.purchases.first { $0.latestTransaction.inAppOwnershipType == "FAMILY_SHARED" }?.latestTransaction.transactionId
            }
            let shared = try #require(sharedIds.first, "the world has a family member's share")
            let own = try setup.transactions(1, type: .autoRenewable)[0]
            for transaction in [shared, own] {
                try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
                try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: false)
            }
            // The accounts' transactions in the ledger, as a run would have them.
            let run = ReconciliationRun(client: setup.apiClient, verifier: try setup.harness.verifier(), store: setup.store, databaseURL: setup.url, logger: setup.harness.logger)
            _ = try await run.execute(.init(kind: .run, window: .fixed(start: Date().addingTimeInterval(-20 * 86_400), end: Date()), mode: .apply))
            let result = try await setup.check()
            let refused = try answer(result, shared)
            #expect(refused.outcome == "not_supported" && refused.detail?.contains("4000185") == true, "\(refused)")
            #expect(setup.taken(shared).isEmpty, "never sent")
            #expect(try answer(result, own).outcome == "sent")
            #expect(result.outcome == .succeeded, "not a problem: \(result.outcome)")
        }
    }

    /// Issue 62, point 4: a refund request about an Advanced Commerce API purchase (its
    /// transaction carries `advancedCommerceInfo`) is not_supported, never sent, and no problem.
    @Test func aRequestAboutAnAdvancedCommercePurchaseIsNotSupportedNotSentAndNoProblem() async throws {
        try await Self.withSetup(seed: 511, configure: { $0.advancedCommerceCustomers = [0, 1, 2, 3] }) { setup in
            let advanced = try #require(
                setup.harness.scenario.customers.prefix(4).first { $0.latestTransaction.type == .autoRenewable }?.latestTransaction.transactionId)
            let own = try #require(
                setup.harness.scenario.customers.dropFirst(4).first { $0.latestTransaction.type == .autoRenewable && $0.latestTransaction.inAppOwnershipType != "FAMILY_SHARED" }?
                    .latestTransaction.transactionId)
            for transaction in [advanced, own] {
                try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
                try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: false)
            }
            let run = ReconciliationRun(client: setup.apiClient, verifier: try setup.harness.verifier(), store: setup.store, databaseURL: setup.url, logger: setup.harness.logger)
            _ = try await run.execute(.init(kind: .run, window: .fixed(start: Date().addingTimeInterval(-20 * 86_400), end: Date()), mode: .apply))
            let result = try await setup.check()
            let refused = try answer(result, advanced)
            #expect(refused.outcome == "not_supported" && refused.detail?.contains("Advanced Commerce") == true, "\(refused)")
            #expect(setup.taken(advanced).isEmpty, "never sent")
            #expect(try answer(result, own).outcome == "sent")
            #expect(result.outcome == .succeeded, "not a problem: \(result.outcome)")
        }
    }

    @Test func anAnswerWhoseReplyWasLostIsSentAgainOnlyOnceAppleAsksAgain() async throws {
        try await Self.withSetup(seed: 508) { setup in
            let transaction = try setup.transactions(1, type: .autoRenewable)[0]
            try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
            try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: true)
            setup.harness.api.inject([.dropAfterHandling], endpoint: "sendConsumptionInformation")
            let first = try await setup.check()
            let lost = try answer(first, transaction)
            #expect(lost.outcome == "failed" && lost.detail?.hasPrefix("no answer came") == true, "\(lost)")
            #expect(setup.taken(transaction).count == 1, "Apple took it; its reply was lost")
            #expect(first.answers?.requestsToApple == 1, "not sent again in the run")
            let second = try await setup.check()
            #expect(try answer(second, transaction).detail == RefundAnswerMachine.awaitingDetail)
            #expect(second.answers?.requestsToApple == 0 && setup.taken(transaction).count == 1, "not sent again while Apple has not asked again")
            // Apple asks again: a new CONSUMPTION_REQUEST for the transaction.
            try setup.harness.api.requestRefund(transactionId: transaction, at: Date())
            let third = try await setup.check()
            #expect(try answer(third, transaction).outcome == "sent")
            #expect(setup.taken(transaction).count == 2)
        }
    }

    @Test func noFactsNoConsentAndAnInvalidValueAreNotSentAndOnlyTheInvalidOneNeedsAPerson() async throws {
        try await Self.withSetup(seed: 502) { setup in
            let ids = try setup.transactions(4, type: .autoRenewable)
            for id in ids { try setup.harness.api.requestRefund(transactionId: id, at: Self.asked) }
            // ids[0]: no row.
            try await setup.facts(ids[1], consented: false, delivery: "DELIVERED", sample: true)
            try await setup.facts(ids[2], consented: true, delivery: "SHIPPED", sample: true)
            try await setup.facts(ids[3], consented: true, delivery: "UNDELIVERED_SERVER_OUTAGE", sample: false, preference: "GRANT_FULL")
            let result = try await setup.check()
            #expect(try answer(result, ids[0]).outcome == "no_facts")
            #expect(try answer(result, ids[1]).outcome == "no_consent")
            let invalid = try answer(result, ids[2])
            #expect(invalid.outcome == "invalid" && invalid.detail?.hasPrefix("delivery_status is 'SHIPPED'") == true, "\(invalid)")
            #expect(try answer(result, ids[3]).outcome == "sent")
            #expect(ids.prefix(3).allSatisfy { setup.taken($0).isEmpty }, "nothing sent for the three")
            #expect(setup.taken(ids[3]).count == 1)
            #expect(result.problems.answersNotSent == 1 && result.outcome == .succeededWithRejections, "invalid needs a person (exit 3)")
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_answers WHERE outcome IN ('no_facts', 'no_consent', 'invalid')") == 3)
            // The three stay open for the next check (the facts may change).
            let open = try await setup.store.openRefundRequests(pair: setup.harness.pair, now: Date()).map(\.transactionId)
            #expect(Set(ids.prefix(3)).isSubset(of: Set(open)) && !open.contains(ids[3]))
        }
    }

    @Test func applesRefusalIsFailedWithItsCodeAndSentAgainAtTheNextCheck() async throws {
        try await Self.withSetup(seed: 503) { setup in
            let transaction = try setup.transactions(1, type: .autoRenewable)[0]
            try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
            try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: true)
            setup.harness.api.inject([.error(status: 400, errorCode: 4_000_000, message: "Invalid request.")], endpoint: "sendConsumptionInformation")
            let first = try await setup.check()
            let failed = try answer(first, transaction)
            #expect(failed.outcome == "failed" && failed.appleStatus == 400 && failed.appleError == 4_000_000, "\(failed)")
            #expect(first.outcome == .succeededWithRejections)
            #expect(setup.taken(transaction).isEmpty)
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_requests WHERE transaction_id = '\(transaction)' AND answered_date IS NULL") == 1)
            let second = try await setup.check()
            #expect(try answer(second, transaction).outcome == "sent")
            #expect(second.outcome == .succeeded)
            #expect(setup.taken(transaction).count == 1)
            let kept = try await setup.store.consumptionAnswers(pair: setup.harness.pair, transactionId: transaction)
            #expect(kept.map(\.row.outcome) == ["failed", "sent"] && kept.first?.row.appleError == 4_000_000)
        }
    }

    @Test func aServerErrorThenApplesAcceptanceIsOneAnswerSentTwice() async throws {
        try await Self.withSetup(seed: 504) { setup in
            let transaction = try setup.transactions(1, type: .nonConsumable)[0]
            try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
            try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: false, consumed: 0)
            setup.harness.api.inject([.error(status: 500, errorCode: 5_000_001, message: "An unknown error occurred. Please try again.")], endpoint: "sendConsumptionInformation")
            let result = try await setup.check()
            #expect(try answer(result, transaction).outcome == "sent")
            #expect(result.answers?.requestsToApple == 2, "Apple said to send it again: the 500, then the 202")
            #expect(setup.taken(transaction).count == 1)
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_answers WHERE transaction_id = '\(transaction)'") == 1)
        }
    }

    @Test func aDryRunListsWhatItWouldSendAndSendsAndWritesNothing() async throws {
        try await Self.withSetup(seed: 505) { setup in
            let ids = try setup.transactions(2, type: .autoRenewable)
            for id in ids { try setup.harness.api.requestRefund(transactionId: id, at: Self.asked, repeats: 1, every: 3600) }
            try await setup.facts(ids[0], consented: true, delivery: "DELIVERED", sample: true, preference: "GRANT_FULL")
            let result = try await setup.check(dryRun: true)
            let would = try answer(result, ids[0])
            #expect(would.outcome == RefundAnswerReport.wouldSend && would.sent?.refundPreference == .grantFull, "\(would)")
            #expect(try answer(result, ids[1]).outcome == "no_facts")
            #expect(result.answers?.answers.count == 2, "one entry per request, its repeat merged: \(String(describing: result.answers))")
            #expect(setup.harness.api.consumptionAnswers.isEmpty)
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_answers") == 0)
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_requests") == 0)
            #expect(try await setup.count("SELECT count(*) FROM app_store.notifications") == 0)
        }
    }

    @Test func aFactsFileThatDoesNotParseStopsTheCheckBeforeAnythingIsRecordedOrSent() async throws {
        try await Self.withSetup(seed: 506) { setup in
            let transaction = try setup.transactions(1, type: .autoRenewable)[0]
            try setup.harness.api.requestRefund(transactionId: transaction, at: Self.asked)
            try await setup.facts(transaction, consented: true, delivery: "DELIVERED", sample: true)
            let error = await #expect(throws: RefundFactsError.self) { try await setup.check(facts: "SELEC customer_consented FROM public.team_refund_facts") }
            #expect(error?.failureKind == .configuration, "exit 78")
            #expect(error?.description.contains("refund-facts.sql") == true, "names the file: \(String(describing: error))")
            #expect(setup.harness.api.consumptionAnswers.isEmpty)
            #expect(try await setup.count("SELECT count(*) FROM app_store.notifications") == 0)
            // A query without one of the contract's columns is refused alike.
            await #expect(throws: RefundFactsError.self) {
                try await setup.check(facts: "SELECT consented AS customer_consented, delivery AS delivery_status FROM public.team_refund_facts WHERE transaction_id = $1")
            }
        }
    }

    @Test func aFactsQueryPastItsTimeoutFailsThatRequestAndTheOthersAreAnswered() async throws {
        try await Self.withSetup(seed: 507) { setup in
            let ids = try setup.transactions(2, type: .autoRenewable)
            for id in ids { try setup.harness.api.requestRefund(transactionId: id, at: Self.asked) }
            try await setup.facts(ids[0], consented: true, delivery: "DELIVERED", sample: true, slow: true)
            try await setup.facts(ids[1], consented: true, delivery: "DELIVERED", sample: true)
            let result = try await setup.check(timeout: .milliseconds(500))
            let slow = try answer(result, ids[0])
            #expect(slow.outcome == "failed" && slow.detail?.contains("statement timeout") == true, "\(slow)")
            #expect(try answer(result, ids[1]).outcome == "sent")
            #expect(setup.taken(ids[0]).isEmpty && setup.taken(ids[1]).count == 1)
            #expect(result.outcome == .succeededWithRejections)
        }
    }

    @Test func applesRefusalOfTheCredentialsEndsTheAnsweringWithTheRefusalRecorded() async throws {
        try await Self.withSetup(seed: 509) { setup in
            let ids = try setup.transactions(2, type: .autoRenewable)
            for id in ids {
                try setup.harness.api.requestRefund(transactionId: id, at: Self.asked)
                try await setup.facts(id, consented: true, delivery: "DELIVERED", sample: true)
            }
            setup.harness.api.inject([.error(status: 401, errorCode: 0, message: "Unauthenticated")], endpoint: "sendConsumptionInformation")
            let error = await #expect(throws: AppStoreAPIError.self) { try await setup.check() }
            #expect(error?.httpStatus == 401)
            #expect(setup.harness.api.requestCounts["sendConsumptionInformation"] == 1, "every answer would be refused: the second is not sent")
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_answers WHERE outcome = 'failed' AND apple_status = 401") == 1)
            #expect(try await setup.count("SELECT count(*) FROM app_store.consumption_answers") == 1)
        }
    }
}
