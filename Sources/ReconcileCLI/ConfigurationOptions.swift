import ArgumentParser
import Reconciliation

/// The flags that override the configuration environment variables: their names and help come
/// from `Settings.Name`, where each setting is spelled once.
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

    @Option(name: .customLong(Settings.Name.environment.flagName), help: ArgumentHelp(Settings.Name.environment.help))
    var environment: String?

    @Option(name: .customLong(Settings.Name.rootCertificates.flagName), help: ArgumentHelp(Settings.Name.rootCertificates.help))
    var rootCertificates: String?

    @Option(name: .customLong(Settings.Name.apiBaseURL.flagName), help: ArgumentHelp(Settings.Name.apiBaseURL.help))
    var apiBaseURL: String?

    @OptionGroup var database: DatabaseOptions

    var settings: Settings {
        Settings(flags: [
            .issuerId: issuerId, .keyId: keyId, .privateKey: privateKey, .bundleId: bundleId,
            .appAppleId: appAppleId, .environment: environment, .rootCertificates: rootCertificates,
            .apiBaseURL: apiBaseURL, .databaseURL: database.databaseURL,
        ])
    }
}

/// Only the database setting, for commands that need nothing else.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong(Settings.Name.databaseURL.flagName), help: ArgumentHelp(Settings.Name.databaseURL.help))
    var databaseURL: String?

    var settings: Settings { Settings(flags: [.databaseURL: databaseURL]) }
}
