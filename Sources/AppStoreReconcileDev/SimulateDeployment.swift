import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import Reconciliation
import ReconcileCLI
import SignedData

extension SimulateCommand {
    /// `simulate --deployment`: the demo's two apps in both environments, served until Ctrl-C,
    /// with the configuration file that points `appstore-reconcile` at all four App Stores.
    func runDeployment() async throws {
        let now = Date()
        let outageStart = now.addingTimeInterval(-outageStartedHoursAgo * 3600)
        let world = try SimulatedDeployment(
            apps: DemoDeployment.apps, now: now,
            options: { environment in
                var options = SimulatorOptions()
                // Apple's Sandbox limits are a tenth of Production's.
                options.requestsPerSecond = rateLimit > 0 ? (environment == .production ? rateLimit : rateLimit / 10) : nil
                return options
            },
            configure: { configuration in
                let production = configuration.environment == .production
                configuration.seed = seed + (configuration.bundleId == DemoDeployment.apps[0].bundleId ? 0 : 2) + (production ? 0 : 1)
                configuration.customers = production ? customers : max(1, customers / 4)
                configuration.history = days * 86_400
                configuration.outage = outageStart..<outageStart.addingTimeInterval(outageHours * 3600)
            }
        )
        let directory = filesDirectory ?? NSTemporaryDirectory() + "appstore-simulator-\(UUID().uuidString.prefix(8))"
        let files = try SimulatorFiles.write(for: world.worlds[0], in: directory)
        try await world.withRunning { production, sandbox in
            let config = directory + "/appstore.yaml"
            try world.configurationFile(files: files, production: production, sandbox: sandbox).write(toFile: config, atomically: true, encoding: .utf8)
            print("App Store simulator running: Production at \(production), Sandbox at \(sandbox)")
            for api in world.worlds {
                let scenario = api.scenario
                print(
                    "  \(scenario.configuration.bundleId) \(scenario.configuration.environment.rawValue): \(scenario.configuration.customers) customers, "
                        + "\(scenario.notifications.count) notifications, \(scenario.missedNotifications.count) never delivered")
            }
            let first = world.worlds[0]
            let token = try BearerTokenIssuer(
                credentials: APICredentials(
                    issuerId: first.credentials.issuerId, keyId: first.credentials.keyId, bundleId: first.scenario.configuration.bundleId,
                    signingKey: first.credentials.privateKey),
                lifetime: 3600
            ).token()
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            print("""
                  outage: \(ReportTimeline.iso(outageStart)) to \(ReportTimeline.iso(outageStart.addingTimeInterval(outageHours * 3600)))

                Point appstore-reconcile at all four App Stores with the configuration file (and your ledger):
                  export APPSTORE_CONFIG=\(config)
                  export DATABASE_URL=postgresql://…

                Try it (\(first.scenario.configuration.bundleId)'s Production; the bearer token is valid for 60 minutes):
                  curl -s -X POST '\(production)/inApps/v1/notifications/history' -H 'Authorization: Bearer \(token)' \
                -H 'Content-Type: application/json' -d '{"startDate":\(nowMs - Int64(days * 86_400_000)),"endDate":\(nowMs)}'

                Press Ctrl-C to stop.
                """)
            fflush(nil)
            await waitForTerminationSignal()
        }
    }
}
