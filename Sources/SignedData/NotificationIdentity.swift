import Foundation

/// The app and environment a notification is about, taken from `data`, else `summary`, else
/// `externalPurchaseToken` (its environment inferred from the `SANDBOX` prefix), else `appData`:
/// the order Apple's own verifier reads them in. `appAppleId` is absent in Sandbox.
public struct NotificationIdentity: Hashable, Sendable {
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?

    public init(bundleId: String?, appAppleId: Int64?, environment: AppStoreEnvironment?) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
    }

    /// The App Store this names, when it names both a bundle ID and an environment.
    public var pair: AppStorePair? {
        guard let bundleId, let environment else { return nil }
        return AppStorePair(bundleId: bundleId, environment: environment)
    }
}

extension NotificationPayload {
    /// Whom the notification is about; nil when it has none of the four parts that say.
    public var identity: NotificationIdentity? {
        if let data {
            NotificationIdentity(bundleId: data.bundleId, appAppleId: data.appAppleId, environment: data.environment)
        } else if let summary {
            NotificationIdentity(bundleId: summary.bundleId, appAppleId: summary.appAppleId, environment: summary.environment)
        } else if let token = externalPurchaseToken {
            NotificationIdentity(bundleId: token.bundleId, appAppleId: token.appAppleId, environment: token.inferredEnvironment)
        } else if let appData {
            NotificationIdentity(bundleId: appData.bundleId, appAppleId: appData.appAppleId, environment: appData.environment)
        } else {
            nil
        }
    }
}
