package import Decisions
import DeploymentConfiguration
package import Foundation
package import Ledger
package import LedgerModel
package import SignedData

/// The App Stores (app, environment) a command works on, each with its settings, resolved once:
/// the flags over the environment's variables over the configuration file (`--config`, else
/// `APPSTORE_CONFIG`); without a file, the one app the variables and flags describe, in each
/// environment given. A configuration error names the key and the file (exit 78).
package struct Deployment: Sendable {
    /// One (app, environment) pair's settings, and where its recovered notifications go.
    package struct Pair: Sendable {
        package var pair: AppStorePair
        package var settings: Settings
        /// The file's `deliverTo` for this pair (a flag or APPSTORE_DELIVER_TO wins).
        package var deliverTo: String?
        /// The app's `refundRequests.facts` file (nil: its refund requests are never answered).
        package var refundFacts: RefundFactsQuery?
        /// For a Production pair, the same app's Sandbox settings when the file lists that
        /// environment, selected or not: where `import` asks about IDs Production does not know.
        package var sandboxSettings: Settings?
        /// The file's `overdueAfter`: how long past its due time a notification Apple owes is overdue.
        package var overdueAfter: TimeInterval = Pair.defaultOverdueAfter
        /// Without a file, or when it does not say: an hour (`GapRules.defaultOverdueAfter`).
        package static let defaultOverdueAfter: TimeInterval = GapRules.defaultOverdueAfter
        /// The file's `audit`: the nightly's audit of a random sample (`NightlyAudit.standard` when it does not say).
        package var audit = NightlyAudit.standard

        package init(
            pair: AppStorePair, settings: Settings, deliverTo: String? = nil, refundFacts: RefundFactsQuery? = nil, sandboxSettings: Settings? = nil,
            overdueAfter: TimeInterval = Pair.defaultOverdueAfter
        ) {
            self.overdueAfter = overdueAfter
            self.pair = pair
            self.settings = settings
            self.deliverTo = deliverTo
            self.refundFacts = refundFacts
            self.sandboxSettings = sandboxSettings
        }
    }

    /// In the configuration's order; never empty.
    package var pairs: [Pair]

    package init(pairs: [Pair]) {
        self.pairs = pairs
    }

    /// Resolves the pairs `flags.apps` and `flags.environments` select. `keysNeeded: false` for
    /// a command that calls no Apple API (`serve`): the file's private keys need not be readable.
    package static func resolve(
        _ flags: DeploymentFlags, process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true
    ) throws -> Deployment {
        guard let file = try flags.configurationFile(process: process, keysNeeded: keysNeeded) else {
            return Deployment(pairs: try oneAppPairs(flags, process: process))
        }
        let selectedEnvironments = try flags.environments.map { text in
            guard let environment = AppStoreEnvironment(configurationValue: text) else {
                throw ConfigurationError(setting: "--environment", problem: "must be Production or Sandbox, not '\(text.prefix(40))'")
            }
            return environment
        }
        for app in flags.apps where file.app(app) == nil {
            throw ConfigurationError(setting: "--app", problem: "names \(app.prefix(100)), which \(file.path) does not list")
        }
        // The deployment's settings (not an app's): the flag, else the variable, else the file.
        let layered = Settings(flags: [.rootCertificates: flags.rootCertificates, .databaseURL: flags.databaseURL], environment: process)
        var found: [Pair] = []
        for app in file.apps where flags.apps.isEmpty || flags.apps.contains(app.bundleId) {
            func settings(_ environment: AppStoreEnvironment) -> Settings {
                var values: [Settings.Name: String] = [
                    .issuerId: app.issuerId, .keyId: app.keyId, .privateKey: app.privateKey, .bundleId: app.bundleId,
                    .environment: environment.rawValue,
                ]
                values[.appAppleId] = app.appAppleId.map(String.init)
                values[.apiBaseURL] = app.apiBaseURL[environment]
                values[.rootCertificates] = layered.values[.rootCertificates] ?? file.rootCertificates?.joined(separator: ",")
                values[.databaseURL] = layered.values[.databaseURL] ?? file.database
                return Settings(values: values)
            }
            for environment in app.environments where selectedEnvironments.isEmpty || selectedEnvironments.contains(environment) {
                let sandbox = environment == .production && app.environments.contains(.sandbox) ? settings(.sandbox) : nil
                found.append(
                    Pair(
                        pair: AppStorePair(bundleId: app.bundleId, environment: environment), settings: settings(environment),
                        deliverTo: app.deliverTo[environment], refundFacts: try app.refundFacts.map { try Self.refundFacts($0, of: app.bundleId, in: file.path) },
                        sandboxSettings: sandbox, overdueAfter: file.overdueAfter ?? Pair.defaultOverdueAfter
                    )
                )
                found[found.count - 1].audit = NightlyAudit(
                    sample: file.auditSample ?? NightlyAudit.standard.sample,
                    maxShareOfRateLimit: file.auditMaxShareOfRateLimit ?? NightlyAudit.standard.maxShareOfRateLimit
                )
            }
        }
        guard !found.isEmpty else {
            throw ConfigurationError(setting: "--app and --environment", problem: "select no app and environment that \(file.path) lists")
        }
        return Deployment(pairs: found)
    }

    /// An app's facts query (`refundRequests.facts`), read and checked as far as can be without
    /// the database (`LedgerStore.check` does the rest): a file that cannot be read or holds no
    /// single statement is a configuration error naming it.
    static func refundFacts(_ path: String, of bundleId: String, in configuration: String) throws -> RefundFactsQuery {
        do {
            return try RefundFactsQuery.load(path)
        } catch let error as RefundFactsError {
            throw ConfigurationError(setting: "refundRequests.facts of \(bundleId) in \(configuration):", problem: "the file \(error.file) \(error.problem)")
        }
    }

        /// Without a file: the one app of the variables and flags, in each environment given.
    private static func oneAppPairs(_ flags: DeploymentFlags, process: [String: String]) throws -> [Pair] {
        let chosen: [String?] = flags.environments.isEmpty ? [nil] : flags.environments
        var found: [Pair] = []
        for environment in chosen {
            let settings = flags.oneAppSettings(environment: environment, process: process)
            let pair = AppStorePair(bundleId: try settings.bundleId(), environment: try settings.environment())
            if !flags.apps.isEmpty && !flags.apps.contains(pair.bundleId) {
                throw ConfigurationError(setting: "--app", problem: "names an app other than the configured one, \(pair.bundleId)")
            }
            found.append(Pair(pair: pair, settings: settings))
        }
        return found
    }

    /// The one pair of a command that works on one pair at a time; a configuration error naming
    /// the pairs when the selection holds several.
    package func onlyPair() throws -> Pair {
        guard pairs.count == 1, let only = pairs.first else {
            throw ConfigurationError(
                setting: "--app and --environment",
                problem: "must select one app and environment for this command; the configuration has \(pairs.map(\.pair.description).joined(separator: ", "))"
            )
        }
        return only
    }

    /// The ledger's database: every pair's is the same (flag, else DATABASE_URL, else the file's).
    package func databaseURL() throws -> DatabaseURL {
        try pairs[0].settings.databaseURL()
    }
}
