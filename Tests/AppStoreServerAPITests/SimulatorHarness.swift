import Clocks
import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import Logging
import SignedData

/// A scenario served by the simulator, and a client configured for it.
struct SimulatorHarness {
    let api: SimulatedAPI

    init(customers: Int = 40, period: TimeInterval = 86_400, history: TimeInterval = 7 * 86_400, renewalShare: Double = 0.7, environment: AppStoreEnvironment = .production, options: SimulatorOptions = SimulatorOptions(), seed: UInt64 = 11) throws {
        var configuration = Scenario.Configuration()
        configuration.seed = seed
        configuration.customers = customers
        configuration.period = period
        configuration.history = history
        configuration.environment = environment
        configuration.renewalShare = renewalShare
        configuration.outage = Date().addingTimeInterval(-history / 2)..<Date().addingTimeInterval(-history / 2 + 6 * 3600)
        api = try SimulatedAPI(scenario: Scenario(configuration), options: options)
    }

    var scenario: Scenario { api.scenario }

    func client(baseURL: String, requestsPerSecond: Double = 200, retryPolicy: RetryPolicy = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200)), key: SimulatorCredentials? = nil, clock: AnyClock<Duration> = AnyClock(ContinuousClock()), requestTimeout: Duration = .seconds(60)) throws -> AppStoreServerAPIClient {
        let credentials = key ?? api.credentials
        var logger = Logger(label: "client-tests")
        logger.logLevel = .error
        let configuration = AppStoreServerAPIConfiguration(
            credentials: APICredentials(
                issuerId: credentials.issuerId, keyId: credentials.keyId, bundleId: scenario.configuration.bundleId,
                signingKey: credentials.privateKey
            ),
            environment: scenario.configuration.environment, baseURL: try APIBaseURL(baseURL),
            requestsPerSecond: Dictionary(uniqueKeysWithValues: Endpoint.allCases.map { ($0, requestsPerSecond) }),
            retryPolicy: retryPolicy,
            // Longer than any stall of a loaded test machine: these tests count requests, and a
            // retry after a late answer would be one more (the deadline has a test of its own).
            requestTimeout: requestTimeout, clock: clock
        )
        return AppStoreServerAPIClient(configuration: configuration, logger: logger)
    }

    var wholeHistory: NotificationHistoryRequest {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return NotificationHistoryRequest(startDate: now - Int64(scenario.configuration.history * 1000) - 3_600_000, endDate: now + 60_000)
    }
}
