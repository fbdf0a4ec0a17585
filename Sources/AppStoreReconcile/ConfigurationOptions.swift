import ArgumentParser
import Reconciliation

/// The flags that override the configuration environment variables.
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("issuer-id"), help: "Issuer ID from App Store Connect (APPSTORE_ISSUER_ID).")
    var issuerId: String?

    @Option(name: .customLong("key-id"), help: "In-App Purchase key ID (APPSTORE_KEY_ID).")
    var keyId: String?

    @Option(name: .customLong("private-key"), help: "Path to the In-App Purchase .p8 key (APPSTORE_PRIVATE_KEY).")
    var privateKey: String?

    @Option(name: .customLong("bundle-id"), help: "The app's bundle ID (APPSTORE_BUNDLE_ID).")
    var bundleId: String?

    @Option(name: .customLong("app-apple-id"), help: "The app's numeric App Store ID; required in Production (APPSTORE_APP_APPLE_ID).")
    var appAppleId: String?

    @Option(name: .customLong("environment"), help: "Production or Sandbox (APPSTORE_ENVIRONMENT).")
    var environment: String?

    @Option(name: .customLong("root-certificates"), help: "Comma-separated paths of Apple root certificates, DER or PEM (APPSTORE_ROOT_CERTIFICATES).")
    var rootCertificates: String?

    @Option(name: .customLong("api-base-url"), help: "Override of Apple's API host, e.g. the simulator; plain http only to loopback (APPSTORE_API_BASE_URL).")
    var apiBaseURL: String?

    @Option(name: .customLong("database-url"), help: "PostgreSQL URL (DATABASE_URL). Prefer the variable: a flag's value is visible to other users of the machine.")
    var databaseURL: String?

    var settings: Settings {
        Settings(flags: [
            .issuerId: issuerId, .keyId: keyId, .privateKey: privateKey, .bundleId: bundleId,
            .appAppleId: appAppleId, .environment: environment, .rootCertificates: rootCertificates,
            .apiBaseURL: apiBaseURL, .databaseURL: databaseURL,
        ])
    }
}

/// Only the database setting, for commands that need nothing else.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "PostgreSQL URL (DATABASE_URL). Prefer the variable: a flag's value is visible to other users of the machine.")
    var databaseURL: String?

    var settings: Settings { Settings(flags: [.databaseURL: databaseURL]) }
}
