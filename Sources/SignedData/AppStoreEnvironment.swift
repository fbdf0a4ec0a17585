/// The App Store environment a payload or request belongs to. Sandbox data must never land in
/// production records, so every verified payload is checked against the configured one.
public struct AppStoreEnvironment: ExtensibleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let production: Self = "Production"
    public static let sandbox: Self = "Sandbox"
    /// Local StoreKit testing environments; Apple skips signature checks for these. This tool
    /// never does, so payloads from them are always rejected as the wrong environment.
    public static let xcode: Self = "Xcode"
    public static let localTesting: Self = "LocalTesting"

    /// Parses a configuration value case-insensitively (`production`, `Sandbox`, ...).
    public init?(configurationValue: String) {
        switch configurationValue.lowercased() {
        case "production": self = .production
        case "sandbox": self = .sandbox
        default: return nil
        }
    }
}
