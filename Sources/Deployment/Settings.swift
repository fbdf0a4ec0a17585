import Foundation
package import AppStoreServerAPI
package import Ledger
package import SignedData

/// The configuration contract shared by every command. Each setting comes from a flag, else
/// from its environment variable; a missing or malformed one is a `ConfigurationError` that
/// names it (exit code 78). Secrets (the private key, the database password) are read but
/// never echoed: messages name the setting or the file, not its content.
package struct Settings: Sendable {
    /// The raw values, flags already merged over the environment.
    package var values: [Name: String]

    package enum Name: String, CaseIterable, Sendable {
        case issuerId = "APPSTORE_ISSUER_ID"
        case keyId = "APPSTORE_KEY_ID"
        case privateKey = "APPSTORE_PRIVATE_KEY"
        case bundleId = "APPSTORE_BUNDLE_ID"
        case appAppleId = "APPSTORE_APP_APPLE_ID"
        case environment = "APPSTORE_ENVIRONMENT"
        case rootCertificates = "APPSTORE_ROOT_CERTIFICATES"
        case apiBaseURL = "APPSTORE_API_BASE_URL"
        case databaseURL = "DATABASE_URL"

        /// The command-line flag that overrides the variable, without its dashes.
        package var flagName: String {
            switch self {
            case .issuerId: "issuer-id"
            case .keyId: "key-id"
            case .privateKey: "private-key"
            case .bundleId: "bundle-id"
            case .appAppleId: "app-apple-id"
            case .environment: "environment"
            case .rootCertificates: "root-certificates"
            case .apiBaseURL: "api-base-url"
            case .databaseURL: "database-url"
            }
        }

        package var flag: String { "--" + flagName }

        /// What the setting is, for `--help` (the variable's name is added to it).
        private var meaning: String {
            switch self {
            case .issuerId: "Issuer ID from App Store Connect"
            case .keyId: "In-App Purchase key ID"
            case .privateKey: "Path to the In-App Purchase .p8 key"
            case .bundleId: "The app's bundle ID"
            case .appAppleId: "The app's numeric App Store ID; required in Production"
            case .environment: "Production or Sandbox"
            case .rootCertificates: "Comma-separated paths of Apple root certificates, DER or PEM"
            case .apiBaseURL: "Override of Apple's API host, e.g. the simulator; plain http only to loopback"
            case .databaseURL: "PostgreSQL URL"
            }
        }

        /// The flag's help: what it is, the variable it overrides, and a warning where one is due.
        package var help: String {
            let text = "\(meaning) (\(rawValue))."
            return self == .databaseURL ? text + " Prefer the variable: a flag's value is visible to other users of the machine." : text
        }

        var label: String { "\(rawValue) (\(flag))" }
    }

    /// Merges flags (non-nil values) over the process environment.
    package init(flags: [Name: String?], environment: [String: String] = ProcessInfo.processInfo.environment) {
        var values: [Name: String] = [:]
        for name in Name.allCases {
            if let value = environment[name.rawValue], !value.isEmpty { values[name] = value }
            if let flag = flags[name] ?? nil, !flag.isEmpty { values[name] = flag }
        }
        self.values = values
    }

    /// Settings given whole (one pair of a configuration file).
    package init(values: [Name: String]) {
        self.values = values
    }

    package func isSet(_ name: Name) -> Bool { values[name] != nil }

    package func require(_ name: Name) throws -> String {
        guard let value = values[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
            throw ConfigurationError(name, "is not set")
        }
        return value
    }

    // MARK: - Typed settings

    package func environment() throws -> AppStoreEnvironment {
        let text = try require(.environment)
        guard let environment = AppStoreEnvironment(configurationValue: text) else {
            throw ConfigurationError(.environment, "must be Production or Sandbox, not '\(text.prefix(40))'")
        }
        return environment
    }

    /// Required in Production, optional in Sandbox (sandbox payloads carry none).
    package func appAppleId(for environment: AppStoreEnvironment) throws -> Int64? {
        guard let text = values[.appAppleId] else {
            if environment == .production {
                throw ConfigurationError(.appAppleId, "is required in Production (the app's numeric App Store ID)")
            }
            return nil
        }
        guard let value = Int64(text), value > 0 else {
            throw ConfigurationError(.appAppleId, "must be the app's numeric App Store ID, not '\(text.prefix(40))'")
        }
        return value
    }

    package func bundleId() throws -> String {
        let value = try require(.bundleId)
        guard !value.contains(where: \.isWhitespace) else {
            throw ConfigurationError(.bundleId, "must be a bundle ID such as com.example.app")
        }
        return value
    }

    package func rootCertificatePaths() throws -> [String] {
        let paths = try require(.rootCertificates).split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !paths.isEmpty else { throw ConfigurationError(.rootCertificates, "names no file") }
        return paths
    }

    package func databaseURL() throws -> DatabaseURL {
        do {
            return try DatabaseURL(try require(.databaseURL))
        } catch let error as DatabaseURLError {
            throw ConfigurationError(.databaseURL, "is malformed: \(error.description)")
        }
    }

    /// The verifier's configuration: roots, bundle, app and environment.
    package func verifierConfiguration() throws -> VerifierConfiguration {
        let environment = try environment()
        let roots: [X509Certificate]
        do {
            roots = try RootCertificateLoader.load(paths: try rootCertificatePaths())
        } catch let error as VerifierConfigurationError {
            throw ConfigurationError(.rootCertificates, error.description)
        }
        return VerifierConfiguration(
            rootCertificates: roots, bundleId: try bundleId(), appAppleId: try appAppleId(for: environment),
            environment: environment
        )
    }
}

/// A setting that is missing or malformed. The message names the setting; exit code 78.
package struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    package var setting: String
    package var problem: String

    package init(_ name: Settings.Name, _ problem: String) {
        self.setting = name.label
        self.problem = problem
    }

    package init(setting: String, problem: String) {
        self.setting = setting
        self.problem = problem
    }

    package var description: String { "\(setting) \(problem)" }
}

extension Settings {
    /// The API client's configuration: the key file read and checked, the host validated.
    /// `warn` hears about a private key file that others can read.
    package func apiConfiguration(warn: (String) -> Void = { _ in }) throws -> AppStoreServerAPIConfiguration {
        let environment = try environment()
        let issuerId = try require(.issuerId)
        let keyId = try require(.keyId)
        let keyPath = try require(.privateKey)
        guard let data = FileManager.default.contents(atPath: keyPath) else {
            throw ConfigurationError(.privateKey, "names a file that cannot be read: \(keyPath)")
        }
        if let attributes = try? FileManager.default.attributesOfItem(atPath: keyPath),
            let permissions = attributes[.posixPermissions] as? NSNumber,
            let warning = KeyFileExposure.warning(
                path: keyPath, mode: permissions.intValue, fileGroup: (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value,
                processGroup: UInt32(getegid()))
        {
            warn(warning)
        }
        let key: P256SigningKey
        do {
            key = try APICredentials.signingKey(pem: String(decoding: data, as: UTF8.self))
        } catch {
            throw ConfigurationError(.privateKey, "is not the In-App Purchase key (.p8, PEM, P-256) App Store Connect issues: \(keyPath)")
        }
        var baseURL: APIBaseURL?
        if let override = values[.apiBaseURL] {
            do {
                baseURL = try APIBaseURL(override)
            } catch let error as APIBaseURLError {
                throw ConfigurationError(.apiBaseURL, error.description)
            }
        }
        return AppStoreServerAPIConfiguration(
            credentials: APICredentials(issuerId: issuerId, keyId: keyId, bundleId: try bundleId(), signingKey: key),
            environment: environment, baseURL: baseURL
        )
    }
}
