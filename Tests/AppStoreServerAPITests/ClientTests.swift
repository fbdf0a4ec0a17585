import AppStoreServerAPI
import AppStoreSimulator
import Clocks
import Foundation
import Logging
import SignedData
import Testing

@Suite("The API client against the simulator")
struct ClientTests {
    @Test func notificationHistoryPagesToTheEndAndReturnsEachNotificationOnce() async throws {
        let harness = try SimulatorHarness(customers: 40)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            var uuids: [String] = []
            var pages = 0
            for try await page in client.notificationHistory(harness.wholeHistory) {
                pages += 1
                #expect(page.response.notificationHistory.count <= 20)
                for item in page.response.notificationHistory {
                    uuids.append(try #require(UnverifiedPayload.notificationUUID(of: item.signedPayload)))
                }
            }
            let expected = harness.scenario.notifications.map(\.uuid)
            #expect(uuids == expected, "every notification, oldest first, once")
            #expect(pages == (expected.count + 19) / 20)
            // The simulator refuses a token with any other body, so reaching the end proves
            // that every page carried the identical body.
            #expect(client.counts.requests[.notificationHistory] == pages)
        }
    }

    @Test func aTokenSentWithAnotherBodyIsReportedAsAPaginationTokenProblem() async throws {
        let harness = try SimulatorHarness(customers: 40)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            let first = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            let token = try #require(first.paginationToken)
            var other = harness.wholeHistory
            other.onlyFailures = true
            do {
                _ = try await client.notificationHistoryPage(other, paginationToken: token)
                Issue.record("a token bound to another body was accepted")
            } catch let error as AppStoreAPIError {
                #expect(error.code == .invalidPaginationToken)
                #expect(error.isPaginationTokenProblem)
            }
        }
    }

    @Test func anExpiredPaginationTokenSurfacesAsItsOwnError() async throws {
        var options = SimulatorOptions()
        // The token for the second page has lapsed (the lifetime rule itself is the simulator's,
        // tested as a value in SimulatedAPITests).
        options.expireTokenOnceAtPage = 1
        let harness = try SimulatorHarness(customers: 40, options: options)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            var iterator = client.notificationHistory(harness.wholeHistory).makeAsyncIterator()
            _ = try await iterator.next()
            do {
                _ = try await iterator.next()
                Issue.record("an expired token was accepted")
            } catch let error as AppStoreAPIError {
                #expect(error.code == .paginationTokenExpired)
                #expect(error.httpStatus == 400)
                #expect(error.isPaginationTokenProblem)
            }
        }
    }

    @Test func transactionHistoryContinuesByRevisionAndAStoredRevisionReturnsOnlyChanges() async throws {
        // Hourly periods over three days: long-lived customers have dozens of transactions.
        let harness = try SimulatorHarness(customers: 20, period: 3600, history: 3 * 86_400, renewalShare: 0.98)
        let customer = try #require(harness.scenario.customers.max { $0.transactionVersions.count < $1.transactionVersions.count })
        #expect(customer.transactionVersions.count > 40, "needs several pages")
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            var transactionIds: [String] = []
            var finalRevision: String?
            var pages = 0
            for try await page in client.transactionHistory(transactionId: customer.originalTransactionId) {
                pages += 1
                #expect(page.signedTransactions.count <= 20)
                for signed in page.signedTransactions {
                    if case .string(let id)? = UnverifiedPayload.fields(of: signed)?["transactionId"] { transactionIds.append(id) }
                }
                finalRevision = page.finalRevision
            }
            let expected = Set(customer.transactionVersions.map { $0.transaction.transactionId! })
            #expect(Set(transactionIds) == expected)
            #expect(transactionIds.count == expected.count, "each transaction once when nothing changed meanwhile")
            #expect(pages == (expected.count + 19) / 20)
            let revision = try #require(finalRevision)

            var again: [HistoryResponse] = []
            for try await page in client.transactionHistory(transactionId: customer.originalTransactionId, startingAt: revision) { again.append(page) }
            #expect(again.count == 1, "one request from the stored revision")
            #expect(again.first?.signedTransactions.isEmpty == true, "nothing changed since")
            #expect(again.first?.finalRevision == revision)
        }
    }

    @Test func allSubscriptionStatusesReturnsTheCustomersTruth() async throws {
        let harness = try SimulatorHarness(customers: 10)
        let customer = harness.scenario.customers[3]
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            let statuses = try await client.allSubscriptionStatuses(transactionId: customer.latestTransaction.transactionId!)
            let last = try #require(statuses.data.first?.lastTransactions.first)
            #expect(last.originalTransactionId == customer.originalTransactionId)
            #expect(last.status == customer.subscriptionStatus)
        }
    }

    /// The client waits on its clock, here one on which a wait takes no time (swift-clocks'
    /// `ImmediateClock`: a sleep moves its time forward by the sleep): so a `Retry-After` ten
    /// minutes away, within Apple's hour, is waited for in full and then the request succeeds,
    /// and the test takes no ten minutes. One request at a time, so sleeps never overlap.
    @Test func a429WaitsUntilTheRetryAfterTimeThenSucceeds() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let clock = ImmediateClock()
            let client = try harness.client(baseURL: baseURL, clock: AnyClock(clock))
            let resumeAt = Int64(Date().timeIntervalSince1970 * 1000) + 600_000
            harness.api.inject([.error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: resumeAt)])
            let started = clock.now
            _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            let waited = started.duration(to: clock.now)
            // Apple's time less the moments between the 429's answer and its reading.
            #expect(waited > .seconds(540) && waited <= .seconds(601), "waited \(waited) on the client's clock, asked for 600 s")
            #expect(client.counts.rateLimited == 1)
            #expect(client.counts.requests[.notificationHistory] == 2)
        }
    }

    /// The same decisions on the same kind of clock: a Retry-After beyond the retry budget
    /// (`maximumTotal`, 1 s here) but within the rate-limit bound (5 minutes here) is waited for,
    /// and the request succeeds; one beyond the bound stops it at once with the time to resume.
    @Test func a429BeyondTheRetryBudgetIsWaitedForWithinTheBoundAndStopsBeyondIt() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let policy = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200), maximumTotal: .seconds(1), maximumRateLimitWait: .seconds(300))
            let clock = ImmediateClock()
            let client = try harness.client(baseURL: baseURL, retryPolicy: policy, clock: AnyClock(clock))
            let soon = Int64(Date().timeIntervalSince1970 * 1000) + 120_000
            harness.api.inject([.error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: soon)])
            let started = clock.now
            let page = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            #expect(!page.notificationHistory.isEmpty)
            #expect(started.duration(to: clock.now) > .seconds(60), "it waited for Apple's time, 120 s away")

            let late = Date().addingTimeInterval(1_800)
            harness.api.inject([.error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: Int64(late.timeIntervalSince1970 * 1000))])
            let before = clock.now
            do {
                _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
                Issue.record("a 429 beyond the bound must stop the request")
            } catch let error as RateLimitedUntil {
                #expect(abs(error.resumeAt.timeIntervalSince(late)) < 2, "resume at Apple's time: \(error.resumeAt) against \(late)")
                #expect(error.endpoint == .notificationHistory)
            }
            #expect(before.duration(to: clock.now) < .seconds(1), "stopped at once, without waiting")
        }
    }

    @Test func aRetryableErrorIsRetriedUntilItSucceeds() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            let retryable = InjectedAnswer.error(status: 500, errorCode: 5_000_001, message: "An unknown error occurred. Please try again.")
            harness.api.inject([retryable, retryable])
            let page = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            #expect(!page.notificationHistory.isEmpty)
            #expect(client.counts.retries == 2)
            #expect(client.counts.requests[.notificationHistory] == 3)
        }
    }

    @Test func anInvalidTransactionIdIsNotRetried() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            do {
                _ = try await client.allSubscriptionStatuses(transactionId: "not-a-number")
                Issue.record("accepted an invalid transaction id")
            } catch let error as AppStoreAPIError {
                #expect(error.code == .invalidTransactionId)
                #expect(error.httpStatus == 400)
            }
            #expect(client.counts.requests[.subscriptionStatuses] == 1, "sent once, never retried")
            #expect(harness.api.requestCounts["subscriptionStatuses"] == 1)
        }
    }

    @Test func retriesStopAtTheConfiguredNumberOfAttempts() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL, retryPolicy: RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50)))
            harness.api.inject(Array(repeating: .error(status: 503, errorCode: 5_000_000, message: "down"), count: 5))
            await #expect(throws: RetriesExhausted.self) {
                _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            }
            #expect(harness.api.requestCounts["notificationHistory"] == 3)
        }
    }

    @Test func rejectedCredentialsAreReportedAsACredentialsProblem() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let stranger = SimulatorCredentials(keyId: harness.api.credentials.keyId, issuerId: harness.api.credentials.issuerId)
            let client = try harness.client(baseURL: baseURL, key: stranger)
            do {
                _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
                Issue.record("a token signed by another key was accepted")
            } catch let error as AppStoreAPIError {
                #expect(error.httpStatus == 401)
                #expect(error.isCredentialsProblem)
                #expect(error.description.contains("APPSTORE_PRIVATE_KEY"))
                #expect(!error.description.contains("Bearer"))
            }
            #expect(client.counts.requests[.notificationHistory] == 1, "401 is not retried")
        }
    }

    @Test func aGarbage200IsRetriedAsAnIncompleteAnswer() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            harness.api.inject([.garbage])
            let page = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            #expect(!page.notificationHistory.isEmpty)
            #expect(client.counts.retries == 1)
        }
    }

    @Test func concurrentCallersUnderOneLimiterStayWithinTheRate() async throws {
        var options = SimulatorOptions()
        options.requestsPerSecond = 20
        let harness = try SimulatorHarness(customers: 10, options: options)
        let customers = harness.scenario.customers
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL, requestsPerSecond: 20)
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        for request in 0..<8 {
                            let customer = customers[(worker * 8 + request) % customers.count]
                            _ = try await client.allSubscriptionStatuses(transactionId: customer.originalTransactionId)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let elapsed = ContinuousClock.now - started
            // 64 requests at 20 per second, evenly spaced: at least 63/20 s, and the simulator,
            // holding only one second's worth of tokens, never had to refuse one.
            #expect(harness.api.rateLimitedCount == 0)
            #expect(client.counts.rateLimited == 0)
            #expect(elapsed >= .milliseconds(3_100), "64 requests took \(elapsed)")
        }
    }
}

extension ClientTests {
    /// Apple's `Retry-After` holds back the app's every request to that endpoint: callers that
    /// had reserved a slot before the 429 arrived must wait too. The simulator allows 4
    /// requests/s per endpoint (its own 429s say when the next token comes) and, first of all,
    /// answers one 429 whose `Retry-After` is 10 s away, as Apple's hourly limit would; the
    /// client paces at 6/s, so 64 callers have slots reserved across the first 10.7 s, inside
    /// that pause. No request reaches the endpoint between a 429's answer and its `Retry-After`,
    /// but for requests already on the wire, and every caller gets its answer. One run (it was 5,
    /// about 25 s each): the rule itself is proven on a test clock, deterministically, by
    /// `ClientUnitTests.aPauseHoldsBackCallersThatHadReservedASlotBeforeIt`; this one shows it
    /// holds through HTTP against an endpoint that counts arrivals.
    ///
    /// "On the wire" is 7 s here, not 100 ms (5 s until a fresh-clone CI run saw two arrivals
    /// 5.03 and 5.07 s after the 429: the suite's flood tests share the two cores; the limiter's
    /// old behaviour should still fail, its callers leaving at their slots through the last 3 s:
    /// reasoned, not yet run with 7 s). The simulator runs in the test's process and can
    /// only time arrivals: under the whole suite on two cores, the client's event loop once
    /// learned of a 429 about 2.5 s after it was answered, sending on its schedule meanwhile, as
    /// it must when it does not know (measured: a 3 s pause with a 1.5 s allowance and a 6 s pause
    /// with a 2.5 s allowance both failed so, with the fixed limiter). With the limiter as it was
    /// before 4b3f9a7 every caller leaves at its slot, so those between 5 and 10 s arrive early
    /// and the test fails (with the 6 s version: arrivals 2.7–2.8 s after the 429, 3.2–3.3 s before
    /// its Retry-After; run and seen). The rate limiter's own test
    /// (`aPauseHoldsBackCallersThatHadReservedASlotBeforeIt`) holds it exactly, on a test clock.
    @Test func noRequestLeavesBeforeARetryAfterWhateverTheConcurrency() async throws {
        var options = SimulatorOptions()
        options.requestsPerSecond = 4
        options.retryAfterGrace = 7
        let harness = try SimulatorHarness(customers: 64, options: options)
        let customers = harness.scenario.customers
        var rateLimited = 0
        do {
            let api = try SimulatedAPI(scenario: harness.scenario, options: options, credentials: harness.api.credentials, pki: harness.api.pki)
            rateLimited += try await SimulatorServer.withRunning(api) { baseURL in
                let client = try harness.client(
                    baseURL: baseURL, requestsPerSecond: 6,
                    retryPolicy: RetryPolicy(maximumAttempts: 40, initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
                )
                let resumeAt = Int64(Date().timeIntervalSince1970 * 1000) + 10_000
                api.inject([.error(status: 429, errorCode: 4_290_000, message: "Rate limit exceeded.", retryAfterMilliseconds: resumeAt)])
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for customer in customers {
                        group.addTask {
                            let statuses = try await client.allSubscriptionStatuses(transactionId: customer.originalTransactionId)
                            #expect(statuses.data.contains { $0.lastTransactions.contains { $0.originalTransactionId == customer.originalTransactionId } })
                        }
                    }
                    try await group.waitForAll()
                }
                let early = api.requestsBeforeRetryAfter
                #expect(early.isEmpty, "requests before Retry-After: \(early)")
                #expect(client.counts.rateLimited >= 1)
                return client.counts.rateLimited
            }
        }
        #expect(rateLimited >= 1, "the test proves something only if a 429 was met")
    }
}

@Suite("The client survives the simulator's injected faults")
struct FaultTests {
    func pageThrough(_ options: SimulatorOptions) async throws -> (uuids: [String], expected: [String], retries: Int) {
        // Enough pages (about 20) that a 30% fault rate surely strikes.
        let harness = try SimulatorHarness(customers: 100, options: options)
        return try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL, retryPolicy: RetryPolicy(maximumAttempts: 12, initialDelay: .milliseconds(5), maximumDelay: .milliseconds(40)))
            var uuids: [String] = []
            for try await page in client.notificationHistory(harness.wholeHistory) {
                uuids += page.response.notificationHistory.compactMap { UnverifiedPayload.notificationUUID(of: $0.signedPayload) }
            }
            return (uuids, harness.scenario.notifications.map(\.uuid), client.counts.retries)
        }
    }

    @Test func aShareOfRetryableServerErrorsStillYieldsEveryNotificationOnce() async throws {
        var options = SimulatorOptions()
        options.retryableErrorRate = 0.3
        let (uuids, expected, retries) = try await pageThrough(options)
        #expect(uuids == expected)
        #expect(retries > 0)
    }

    @Test func truncatedBodiesAreRetriedAndNothingIsLost() async throws {
        var options = SimulatorOptions()
        options.truncatedBodyRate = 0.3
        let (uuids, expected, retries) = try await pageThrough(options)
        #expect(uuids == expected)
        #expect(retries > 0)
    }

    @Test func connectionsDroppedMidBodyAreRetriedAndNothingIsLost() async throws {
        var options = SimulatorOptions()
        options.droppedConnectionRate = 0.3
        let (uuids, expected, retries) = try await pageThrough(options)
        #expect(uuids == expected)
        #expect(retries > 0)
    }

    @Test func addedLatencyDelaysEveryAnswer() async throws {
        var options = SimulatorOptions()
        options.latency = .milliseconds(300)
        let harness = try SimulatorHarness(customers: 5, options: options)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            let started = ContinuousClock.now
            _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            #expect(ContinuousClock.now - started >= .milliseconds(300))
        }
    }

    @Test func aRequestThatOutlivesItsDeadlineIsATimeout() async throws {
        var options = SimulatorOptions()
        options.latency = .seconds(30)
        let harness = try SimulatorHarness(customers: 5, options: options)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            var configuration = try harness.client(baseURL: baseURL).configuration
            configuration.requestTimeout = .milliseconds(500)
            configuration.retryPolicy = RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(10))
            let client = AppStoreServerAPIClient(configuration: configuration, logger: .init(label: "timeout"))
            let started = ContinuousClock.now
            await #expect(throws: RetriesExhausted.self) {
                _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil)
            }
            // Two attempts of 0.5 s each against a server that answers each after 30 s: without the
            // deadline they take at least 60 s; less than 45 s proves it, with room for a loaded
            // machine (the whole suite once stalled this process for about 20 s).
            #expect(ContinuousClock.now - started < .seconds(45), "gave up at the deadline, not when the server answered")
        }
    }
}
