import AppStoreServerAPI
import AppStoreSimulator
import ArgumentParser
import Foundation
import Logging
import Reconciliation
import ReconcileCLI
import SignedData

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run the App Store simulator: a fake App Store Server API with a generated scenario, until Ctrl-C.",
        discussion: """
            Serves Get Notification History, Get Transaction History v2, Get All Subscription Statuses, Send \
            Consumption Information v2, Look Up Order ID (Production only) and the test-notification endpoints on a loopback port, following Apple's documented behaviour (paging, \
            subtype filters, token expiry, JWT checks, rate limits). The scenario is generated from a seed: \
            customers whose subscriptions renew, lapse, fail billing and get refunded, and an outage during \
            which deliveries to the app's server failed. Everything is signed by a test PKI minted at start.

            Prints the environment variables that point appstore-reconcile (or your own code) at it, and a \
            curl command with a bearer token valid for 60 minutes. The key and root certificate are written to \
            --files-directory (a temporary directory by default). Test material only: nothing here is secret.

            --deployment: a team's whole App Store instead, two apps (com.example.photos, com.example.recipes), \
            each in Production (--customers customers) and Sandbox (a quarter of them, a tenth of the rate limit), \
            on one host per environment that tells the apps apart by the JWT's bid; writes the configuration file \
            of all four (appstore.yaml) beside the key and prints APPSTORE_CONFIG.
            """
    )

    @Option(help: "Number of customers in the scenario.")
    var customers = 1000

    @Option(help: "Seed of the scenario: the same seed gives the same world.")
    var seed: UInt64 = 1

    @Option(help: "Production or Sandbox (sandbox never retries deliveries).")
    var environment = "Production"

    @Option(help: "Days of history the scenario covers.")
    var days = 7.0

    @Option(help: "Hours ago the outage started.")
    var outageStartedHoursAgo = 6.0

    @Option(help: "Hours the outage lasted.")
    var outageHours = 4.0

    @Option(help: "Requests per second the simulator allows per endpoint (Apple: 50 in Production); 0 for no limit.")
    var rateLimit = 50.0

    @Option(help: "Port to listen on (127.0.0.1); 0 picks a free one.")
    var port = 0

    @Option(help: "Where to write the API key (.p8) and the root certificate.")
    var filesDirectory: String?

    @Flag(help: "Two apps, each in Production and Sandbox, and their configuration file (APPSTORE_CONFIG).")
    var deployment = false

    func validate() throws {
        guard AppStoreEnvironment(configurationValue: environment) != nil else {
            throw ValidationError("--environment must be Production or Sandbox")
        }
        guard customers > 0, days > 0, outageHours >= 0, outageStartedHoursAgo >= outageHours else {
            throw ValidationError("--customers and --days must be positive, and the outage must have ended before now")
        }
    }

    func run() async throws {
        try await withExitStatus {
            if deployment { return try await runDeployment() }
            var scenarioConfiguration = Scenario.Configuration()
            scenarioConfiguration.seed = seed
            scenarioConfiguration.customers = customers
            scenarioConfiguration.environment = AppStoreEnvironment(configurationValue: environment)!
            scenarioConfiguration.history = days * 86_400
            let now = scenarioConfiguration.now
            let outageStart = now.addingTimeInterval(-outageStartedHoursAgo * 3600)
            scenarioConfiguration.outage = outageStart..<outageStart.addingTimeInterval(outageHours * 3600)
            var options = SimulatorOptions()
            options.requestsPerSecond = rateLimit > 0 ? rateLimit : nil
            let api = try SimulatedAPI(scenario: Scenario(scenarioConfiguration), options: options)
            let directory = filesDirectory ?? NSTemporaryDirectory() + "appstore-simulator-\(UUID().uuidString.prefix(8))"
            let files = try SimulatorFiles.write(for: api, in: directory)
            let scenario = api.scenario

            try await SimulatorServer.withRunning(api, port: port) { baseURL in
                let token = try BearerTokenIssuer(
                    credentials: APICredentials(
                        issuerId: api.credentials.issuerId, keyId: api.credentials.keyId, bundleId: scenario.configuration.bundleId,
                        signingKey: api.credentials.privateKey
                    ),
                    lifetime: 3600
                ).token()
                let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
                let startMs = nowMs - Int64(days * 86_400_000)
                print("""
                    App Store simulator running at \(baseURL)
                      scenario: \(customers) customers, seed \(seed), \(scenario.configuration.environment), \
                    \(scenario.notifications.count) notifications, \(scenario.missedNotifications.count) never delivered
                      outage: \(ReportTimeline.iso(outageStart)) to \(ReportTimeline.iso(outageStart.addingTimeInterval(outageHours * 3600)))

                    Point appstore-reconcile (or your own code) at it:
                    """)
                for (name, value) in files.environment(for: api, baseURL: baseURL) { print("  export \(name)=\(value)") }
                print("""

                    Try it (the bearer token is valid for 60 minutes):
                      curl -s -X POST '\(baseURL)/inApps/v1/notifications/history' -H 'Authorization: Bearer \(token)' \
                    -H 'Content-Type: application/json' -d '{"startDate":\(startMs),"endDate":\(nowMs)}'

                    Press Ctrl-C to stop.
                    """)
                fflush(nil)
                await waitForTerminationSignal()
            }
        }
    }

}
