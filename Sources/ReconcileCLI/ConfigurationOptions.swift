import ArgumentParser
import DeploymentConfiguration
import Foundation
import Reconciliation
import SignedData

/// The configuration of the commands that talk to Apple: a configuration file of every app and
/// environment (`--config`, else `APPSTORE_CONFIG`), else the one-app variables; the flags
/// override the variables, which override the file. Names and help of the one-app settings
/// come from `Settings.Name`, where each is spelled once.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong(Settings.Name.issuerId.flagName), help: ArgumentHelp(Settings.Name.issuerId.help))
    var issuerId: String?

    @Option(name: .customLong(Settings.Name.keyId.flagName), help: ArgumentHelp(Settings.Name.keyId.help))
    var keyId: String?

    @Option(name: .customLong(Settings.Name.privateKey.flagName), help: ArgumentHelp(Settings.Name.privateKey.help))
    var privateKey: String?

    @Option(name: .customLong(Settings.Name.bundleId.flagName), help: ArgumentHelp(Settings.Name.bundleId.help))
    var bundleId: String?

    @Option(name: .customLong(Settings.Name.appAppleId.flagName), help: ArgumentHelp(Settings.Name.appAppleId.help))
    var appAppleId: String?

    @Option(
        name: .customLong(Settings.Name.environment.flagName),
        help: ArgumentHelp(
            "Production or Sandbox (APPSTORE_ENVIRONMENT); repeatable. With a configuration file: only these environments of its apps."
        )
    )
    var environments: [String] = []

    @Option(name: .customLong("app"), help: ArgumentHelp("Only this app of the configuration (its bundle ID); repeatable.", valueName: "bundle-id"))
    var apps: [String] = []

    @Option(name: .customLong(Settings.Name.rootCertificates.flagName), help: ArgumentHelp(Settings.Name.rootCertificates.help))
    var rootCertificates: String?

    @Option(name: .customLong(Settings.Name.apiBaseURL.flagName), help: ArgumentHelp(Settings.Name.apiBaseURL.help))
    var apiBaseURL: String?

    @OptionGroup var database: DatabaseOptions

    /// One (app, environment) pair's settings, and where its recovered notifications go.
    struct Pair: Sendable {
        var pair: AppStorePair
        var settings: Settings
        /// The file's `deliverTo` for this pair (a flag or APPSTORE_DELIVER_TO wins).
        var deliverTo: String?
    }

    /// The one-app settings of flags and variables (the configuration file aside).
    func oneAppSettings(environment: String?, process: [String: String]) -> Settings {
        Settings(
            flags: [
                .issuerId: issuerId, .keyId: keyId, .privateKey: privateKey, .bundleId: bundleId,
                .appAppleId: appAppleId, .environment: environment, .rootCertificates: rootCertificates,
                .apiBaseURL: apiBaseURL, .databaseURL: database.databaseURL,
            ],
            environment: process
        )
    }

    /// Every configured (app, environment) pair `--app` and `--environment` select, in the
    /// configuration's order. A configuration error names the key and the file (exit 78).
    /// `keysNeeded: false` for a command that calls no Apple API (`serve`).
    func pairs(process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true) throws -> [Pair] {
        guard let file = try database.configurationFile(process: process, keysNeeded: keysNeeded) else {
            return try oneAppPairs(process: process)
        }
        let selectedEnvironments = try environments.map { text in
            guard let environment = AppStoreEnvironment(configurationValue: text) else {
                throw ConfigurationError(setting: "--environment", problem: "must be Production or Sandbox, not '\(text.prefix(40))'")
            }
            return environment
        }
        for app in apps where file.app(app) == nil {
            throw ConfigurationError(setting: "--app", problem: "names \(app.prefix(100)), which \(file.path) does not list")
        }
        // The deployment's settings (not an app's): the flag, else the variable, else the file.
        let layered = Settings(flags: [.rootCertificates: rootCertificates, .databaseURL: database.databaseURL], environment: process)
        var found: [Pair] = []
        for app in file.apps where apps.isEmpty || apps.contains(app.bundleId) {
            for environment in app.environments where selectedEnvironments.isEmpty || selectedEnvironments.contains(environment) {
                var values: [Settings.Name: String] = [
                    .issuerId: app.issuerId, .keyId: app.keyId, .privateKey: app.privateKey, .bundleId: app.bundleId,
                    .environment: environment.rawValue,
                ]
                values[.appAppleId] = app.appAppleId.map(String.init)
                values[.apiBaseURL] = app.apiBaseURL[environment]
                values[.rootCertificates] = layered.values[.rootCertificates] ?? file.rootCertificates?.joined(separator: ",")
                values[.databaseURL] = layered.values[.databaseURL] ?? file.database
                found.append(
                    Pair(
                        pair: AppStorePair(bundleId: app.bundleId, environment: environment), settings: Settings(values: values),
                        deliverTo: app.deliverTo[environment]
                    )
                )
            }
        }
        guard !found.isEmpty else {
            throw ConfigurationError(setting: "--app and --environment", problem: "select no app and environment that \(file.path) lists")
        }
        return found
    }

    /// Without a file: the one app of the variables and flags, in each environment given.
    private func oneAppPairs(process: [String: String]) throws -> [Pair] {
        let chosen: [String?] = environments.isEmpty ? [nil] : environments
        var found: [Pair] = []
        for environment in chosen {
            let settings = oneAppSettings(environment: environment, process: process)
            let pair = AppStorePair(bundleId: try settings.bundleId(), environment: try settings.environment())
            if !apps.isEmpty && !apps.contains(pair.bundleId) {
                throw ConfigurationError(setting: "--app", problem: "names an app other than the configured one, \(pair.bundleId)")
            }
            found.append(Pair(pair: pair, settings: settings, deliverTo: nil))
        }
        return found
    }

    /// The settings of a command that works on one pair at a time.
    func onePair(process: [String: String] = ProcessInfo.processInfo.environment) throws -> Pair {
        let all = try pairs(process: process)
        guard all.count == 1, let only = all.first else {
            throw ConfigurationError(
                setting: "--app and --environment",
                problem: "must select one app and environment for this command; the configuration has \(all.map(\.pair.description).joined(separator: ", "))"
            )
        }
        return only
    }

    /// One pair's settings, for commands that work on one pair (see `onePair`).
    var settings: Settings {
        get throws { try onePair().settings }
    }
}

/// The database setting and the configuration file, for commands that need nothing else.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong(Settings.Name.databaseURL.flagName), help: ArgumentHelp(Settings.Name.databaseURL.help))
    var databaseURL: String?

    @Option(name: .customLong("config"), help: ArgumentHelp("The configuration file (YAML) of every app and environment (APPSTORE_CONFIG).", valueName: "file"))
    var config: String?

    /// The configuration file given, read and checked; nil when none is.
    func configurationFile(process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true) throws -> ConfigurationFile? {
        guard let path = config ?? process["APPSTORE_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) else { return nil }
        do {
            return try ConfigurationFile.load(path: path, keysNeeded: keysNeeded)
        } catch let error as ConfigurationFileError {
            throw ConfigurationError(setting: error.key.map { "\($0) in \(error.file)" } ?? "the configuration file \(error.file)", problem: error.problem)
        }
    }

    /// The database: the flag, else DATABASE_URL, else the file's `database`.
    var settings: Settings {
        get throws {
            var settings = Settings(flags: [.databaseURL: databaseURL])
            if settings.values[.databaseURL] == nil, let file = try configurationFile(), let url = file.database {
                settings.values[.databaseURL] = url
            }
            return settings
        }
    }
}
