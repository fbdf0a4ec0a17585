package import DeploymentConfiguration
import Foundation

/// What the command line gave for the deployment's settings (nil: not given); the command line
/// parses them, `Deployment.resolve` layers them over the variables and the file.
package struct DeploymentFlags: Sendable, Hashable {
    package var issuerId: String?
    package var keyId: String?
    package var privateKey: String?
    package var bundleId: String?
    package var appAppleId: String?
    /// `--environment`, repeatable: with a file, only these environments of its apps.
    package var environments: [String] = []
    /// `--app`, repeatable: with a file, only these apps.
    package var apps: [String] = []
    package var rootCertificates: String?
    package var apiBaseURL: String?
    package var databaseURL: String?
    /// `--config`, else APPSTORE_CONFIG.
    package var config: String?

    package init() {}

    /// The one-app settings of flags and variables (the configuration file aside).
    package func oneAppSettings(environment: String?, process: [String: String]) -> Settings {
        Settings(
            flags: [
                .issuerId: issuerId, .keyId: keyId, .privateKey: privateKey, .bundleId: bundleId,
                .appAppleId: appAppleId, .environment: environment, .rootCertificates: rootCertificates,
                .apiBaseURL: apiBaseURL, .databaseURL: databaseURL,
            ],
            environment: process
        )
    }

    /// The configuration file given, read and checked; nil when none is. Its errors are
    /// configuration errors naming the key and the file.
    package func configurationFile(process: [String: String] = ProcessInfo.processInfo.environment, keysNeeded: Bool = true) throws -> ConfigurationFile? {
        guard let path = config ?? process["APPSTORE_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) else { return nil }
        do {
            return try ConfigurationFile.load(path: path, keysNeeded: keysNeeded)
        } catch let error as ConfigurationFileError {
            throw ConfigurationError(setting: error.key.map { "\($0) in \(error.file)" } ?? "the configuration file \(error.file)", problem: error.problem)
        }
    }

    /// The database alone, for commands that need nothing else: the flag, else DATABASE_URL,
    /// else the file's `database`.
    package func databaseSettings(process: [String: String] = ProcessInfo.processInfo.environment) throws -> Settings {
        var settings = Settings(flags: [.databaseURL: databaseURL], environment: process)
        if settings.values[.databaseURL] == nil, let file = try configurationFile(process: process), let url = file.database {
            settings.values[.databaseURL] = url
        }
        return settings
    }
}
