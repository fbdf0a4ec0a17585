package import Foundation
package import Logging
package import SignedData

/// A team's App Store, simulated whole: several apps, each in Production and Sandbox, signed by
/// one Apple (one test PKI) and called with one team key, with a host per environment on which
/// the JWT's `bid` picks the app (`SimulatedAppStore`). Each (app, environment) is a world of its
/// own (`SimulatedAPI`): its customers, notifications, outage and rate budget. What `demo` and
/// `simulate` run, and what a configuration file of several apps describes.
package struct SimulatedDeployment: Sendable {
    /// An app of the team: its bundle ID and its numeric App Store ID.
    package struct App: Sendable, Hashable {
        package var bundleId: String
        package var appAppleId: Int64

        package init(bundleId: String, appAppleId: Int64) {
            self.bundleId = bundleId
            self.appAppleId = appAppleId
        }
    }

    package let apps: [App]
    /// Every (app, environment) world, apps in order, Production before Sandbox.
    package let worlds: [SimulatedAPI]
    package let production: SimulatedAppStore
    package let sandbox: SimulatedAppStore

    /// `configure` shapes each world's scenario (customers, seed, outage); it is given the app
    /// and environment already set, and one `now` for all. `options` are each environment's
    /// (Apple's rate limits in Sandbox are a tenth of Production's).
    package init(
        apps: [App], now: Date = Date(), options: (AppStoreEnvironment) -> SimulatorOptions = { _ in SimulatorOptions() },
        configure: (inout Scenario.Configuration) -> Void = { _ in }
    ) throws {
        let pki = try TestPKI(TestPKI.Options(referenceTime: now))
        let key = SimulatorCredentials()
        var worlds: [SimulatedAPI] = []
        for app in apps {
            for environment in [AppStoreEnvironment.production, .sandbox] {
                var configuration = Scenario.Configuration()
                configuration.now = now
                configuration.bundleId = app.bundleId
                configuration.appAppleId = app.appAppleId
                configuration.environment = environment
                configure(&configuration)
                worlds.append(try SimulatedAPI(scenario: Scenario(configuration), options: options(environment), credentials: key, pki: pki))
            }
        }
        self.apps = apps
        self.worlds = worlds
        production = try SimulatedAppStore(worlds.filter { $0.scenario.configuration.environment == .production })
        sandbox = try SimulatedAppStore(worlds.filter { $0.scenario.configuration.environment == .sandbox })
    }

    /// The world of one app in one environment.
    package func world(_ pair: AppStorePair) -> SimulatedAPI? {
        worlds.first { $0.scenario.configuration.bundleId == pair.bundleId && $0.scenario.configuration.environment == pair.environment }
    }

    /// Serves both hosts while `body` runs; `body` gets their base URLs (Production, Sandbox).
    package func withRunning<Result: Sendable>(
        logger: Logger = Logger(label: "appstore-simulator"), _ body: @Sendable (_ production: String, _ sandbox: String) async throws -> Result
    ) async throws -> Result {
        let sandbox = self.sandbox
        return try await SimulatorServer.withRunning(production, logger: logger) { production in
            try await SimulatorServer.withRunning(sandbox, logger: logger) { sandbox in try await body(production, sandbox) }
        }
    }

    /// The configuration file (`--config`) of every app in both environments, pointing at the
    /// hosts, with the key and root `files` (`SimulatorFiles.write` for any world: they share
    /// both). `database` is left out when nil (DATABASE_URL gives it: it may hold a password).
    package func configurationFile(files: SimulatorFiles, production: String, sandbox: String, database: String? = nil, refundFacts: String? = nil) -> String {
        Self.configurationFile(
            apps: apps, credentials: worlds[0].credentials, privateKeyPath: files.privateKeyPath, rootCertificatePath: files.rootCertificatePath,
            hosts: (production, sandbox), database: database, refundFacts: refundFacts)
    }

    /// The configuration file of `apps`, each in Production and Sandbox, called with the team key
    /// `credentials` (its .p8 at `privateKeyPath`); `hosts` the two environments' base URLs (nil:
    /// Apple's, no `apiBaseURL`); `refundFacts` every app's facts query (`refundRequests.facts`).
    package static func configurationFile(
        apps: [App], credentials: SimulatorCredentials, privateKeyPath: String, rootCertificatePath: String,
        hosts: (production: String, sandbox: String)?, database: String? = nil, refundFacts: String? = nil
    ) -> String {
        var text = database.map { "database: \($0)\n" } ?? ""
        text += "rootCertificates: [\(rootCertificatePath)]\napps:\n"
        for app in apps {
            text += """
                  - bundleId: \(app.bundleId)
                    appAppleId: \(app.appAppleId)
                    issuerId: \(credentials.issuerId)
                    keyId: \(credentials.keyId)
                    privateKey: \(privateKeyPath)
                    environments: [Production, Sandbox]

                """
            if let hosts { text += "    apiBaseURL:\n      Production: \(hosts.production)\n      Sandbox: \(hosts.sandbox)\n" }
            if let refundFacts { text += "    refundRequests:\n      facts: \(refundFacts)\n" }
        }
        return text
    }
}
