import ArgumentParser
import Deployment
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

    /// What the flags give, for `Deployment.resolve`.
    var flags: DeploymentFlags {
        var flags = DeploymentFlags()
        flags.issuerId = issuerId
        flags.keyId = keyId
        flags.privateKey = privateKey
        flags.bundleId = bundleId
        flags.appAppleId = appAppleId
        flags.environments = environments
        flags.apps = apps
        flags.rootCertificates = rootCertificates
        flags.apiBaseURL = apiBaseURL
        flags.databaseURL = database.databaseURL
        flags.config = database.config
        return flags
    }

    /// The configured App Stores `--app` and `--environment` select (`Deployment.resolve`).
    /// `keysNeeded: false` for a command that calls no Apple API (`serve`).
    func deployment(process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true) throws -> Deployment {
        try Deployment.resolve(flags, process: process, keysNeeded: keysNeeded)
    }

    /// Every selected pair, in the configuration's order.
    func pairs(process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true) throws -> [Deployment.Pair] {
        try deployment(process: process, keysNeeded: keysNeeded).pairs
    }

    /// The pair of a command that works on one pair at a time.
    func onePair(process: [String: String] = ProcessInfo.processInfo.environment) throws -> Deployment.Pair {
        try deployment(process: process).onlyPair()
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

    var flags: DeploymentFlags {
        var flags = DeploymentFlags()
        flags.databaseURL = databaseURL
        flags.config = config
        return flags
    }

    /// The configuration file given, read and checked; nil when none is.
    func configurationFile(process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true) throws -> ConfigurationFile? {
        try flags.configurationFile(process: process, keysNeeded: keysNeeded)
    }

    /// The database: the flag, else DATABASE_URL, else the file's `database`.
    var settings: Settings {
        get throws { try flags.databaseSettings() }
    }
}
