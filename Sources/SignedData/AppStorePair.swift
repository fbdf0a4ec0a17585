/// One app's App Store in one environment: the bundle ID and Production or Sandbox. What a
/// configuration lists, what a run, a rate budget and a run lock belong to, and what every row of
/// the ledger is keyed by (with its own key). Two apps, or one app's two environments, are two
/// App Stores that never share a row.
public struct AppStorePair: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    public var bundleId: String
    public var environment: AppStoreEnvironment

    public init(bundleId: String, environment: AppStoreEnvironment) {
        self.bundleId = bundleId
        self.environment = environment
    }

    /// `com.example.app Sandbox`, as messages and logs name it.
    public var description: String { "\(bundleId) \(environment.rawValue)" }

    /// `com.example.app/Sandbox`: the pair's folder under a report directory, and its label.
    public var path: String { "\(bundleId)/\(environment.rawValue)" }

    /// By bundle ID, then Production before Sandbox.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.bundleId, lhs.environment.rawValue) < (rhs.bundleId, rhs.environment.rawValue)
    }
}
