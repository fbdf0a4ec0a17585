import AppStoreServerAPI
import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import SignedData
import Testing

/// An endpoint that changes things at Apple is sent again only where that cannot apply it twice
/// (endpoints-that-change §2-§4); a read is always asked again.
@Suite struct RepeatRuleTests {
    @Test func onlyAReadOrARequestIdentifierMakesALostAnswerSafeToRepeat() {
        let lost = RepeatRule.AttemptEnd.noAnswer(mayHaveArrived: true)
        #expect(RepeatRule.reads.mayRepeat(after: lost))
        #expect(RepeatRule.sameRequestIdentifier.mayRepeat(after: lost))
        #expect(!RepeatRule.onlyIfNotApplied.mayRepeat(after: lost))
        #expect(!RepeatRule.onlyIfNotApplied.mayRepeat(after: .unreadableSuccess), "a 2xx was applied, however its body reads")
        #expect(RepeatRule.onlyIfNotApplied.mayRepeat(after: .refused(status: 500)), "an error answer applied nothing")
        #expect(RepeatRule.onlyIfNotApplied.mayRepeat(after: .refused(status: 429)))
        #expect(RepeatRule.onlyIfNotApplied.mayRepeat(after: .noAnswer(mayHaveArrived: false)), "never connected: never sent")
    }

    @Test func everyEndpointHasTheRuleOfWhatSendingItTwiceDoes() {
        for endpoint in Endpoint.allCases {
            switch endpoint {
            case .requestTestNotification: #expect(endpoint.repeatRule == .onlyIfNotApplied, "each request sends one more test notification")
            case .sendConsumptionInformation: #expect(endpoint.repeatRule == .onlyIfNotApplied, "Apple documents no identifier for a repeated answer")
            case .notificationHistory, .transactionHistory, .subscriptionStatuses, .testNotificationStatus, .lookUpOrderId, .massExtensionStatus:
                #expect(endpoint.repeatRule == .reads)
            case .extendRenewalDate, .massExtendRenewalDate: #expect(endpoint.repeatRule == .sameRequestIdentifier, "Apple extends once per requestIdentifier")
            }
        }
    }

    @Test func aChangeWhoseAnswerIsLostAfterItArrivedIsNotSentAgain() async throws {
        var options = SimulatorOptions()
        options.droppedConnectionRate = 1
        let harness = try SimulatorHarness(customers: 5, options: options)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL, retryPolicy: RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50)))
            await #expect(throws: OutcomeUnknown.self) { _ = try await client.requestTestNotification() }
            #expect(harness.api.requestCounts["requestTestNotification"] == 1, "sent once: Apple may have applied it")
            // The same fault on a read: asked again until the attempts run out.
            await #expect(throws: RetriesExhausted.self) { _ = try await client.notificationHistoryPage(harness.wholeHistory, paginationToken: nil) }
            #expect(harness.api.requestCounts["notificationHistory"] == 3)
        }
    }

    /// A request Apple applies once per requestIdentifier is sent again after a lost answer; when
    /// the retries run out, the error says one may have been applied (so that the remedy records
    /// it as in doubt, not as never sent), which Apple's error answers alone never say.
    @Test func retriesOfTheSameRequestIdentifierSayWhetherAnyAttemptMayHaveArrived() async throws {
        var options = SimulatorOptions()
        options.droppedConnectionRate = 1
        let harness = try SimulatorHarness(customers: 5, options: options)
        let product = try #require(harness.scenario.customers.first?.latestTransaction.productId)
        let request: @Sendable () -> MassExtendRenewalDateRequest = { MassExtendRenewalDateRequest(requestIdentifier: UUID().uuidString.lowercased(), extendByDays: 1, extendReasonCode: .serviceIssueOrOutage, productId: product) }
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL, retryPolicy: RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50)))
            let lost = try await #require(throws: RetriesExhausted.self) { _ = try await client.massExtendRenewalDate(request()) }
            #expect(lost.anyMayHaveArrived && harness.api.requestCounts["massExtendRenewalDate"] == 3, "\(lost)")
            harness.api.inject(Array(repeating: .error(status: 500, errorCode: 5_000_001, message: "An unknown error occurred. Please try again."), count: 3), endpoint: "massExtendRenewalDate")
            let refused = try await #require(throws: RetriesExhausted.self) { _ = try await client.massExtendRenewalDate(request()) }
            #expect(!refused.anyMayHaveArrived, "three error answers: nothing applied")
        }
    }

    @Test func aChangeApplePlainlyRefusedIsSentAgain() async throws {
        let harness = try SimulatorHarness(customers: 5)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            harness.api.inject([.error(status: 500, errorCode: 5_000_001, message: "An unknown error occurred. Please try again.")])
            let answer = try await client.requestTestNotification()
            #expect(!answer.testNotificationToken.isEmpty)
            #expect(harness.api.requestCounts["requestTestNotification"] == 2)
        }
    }

    /// Only a connection never made proves a request never left. (Seen end to end against a
    /// closed port, the pool's retries of the connection took minutes under the whole suite's
    /// load: the classification is tested here, on the errors themselves.)
    @Test func onlyAConnectionNeverMadeCountsAsNeverSent() async throws {
        let refused: (any Error)? = await {
            do {
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: 9).get()
                try? await channel.close()
                return nil
            } catch {
                return error
            }
        }()
        let error = try #require(refused, "something listens on port 9")
        #expect(AppStoreServerAPIClient.neverConnected(error), "\(error)")
        #expect(AppStoreServerAPIClient.neverConnected(HTTPClientError.connectTimeout))
        #expect(!AppStoreServerAPIClient.neverConnected(HTTPClientError.remoteConnectionClosed))
        #expect(!AppStoreServerAPIClient.neverConnected(HTTPClientError.readTimeout))
        #expect(!AppStoreServerAPIClient.neverConnected(HTTPClientError.deadlineExceeded))
        #expect(!AppStoreServerAPIClient.neverConnected(CancellationError()))
    }
}
