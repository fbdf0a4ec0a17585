import Foundation

/// The part of a notification of a shape this release does not know: a top-level object other
/// than `data`, `summary`, `externalPurchaseToken` and `appData` that names an app. Apple adds
/// such parts (`unclaimInfo` of UNCLAIM_SEATS, App Store Server Notifications 2.23, in place of
/// `data`); a verified notification carrying one is recorded, attributed by what the part
/// carries, and changes nothing the tool has no policy for (issue 62, point 6).
public struct NotificationOtherPart: Hashable, Sendable {
    /// The part's key in the payload (`unclaimInfo`).
    public var name: String
    public var identity: NotificationIdentity
    /// The part's `originalTransactionId`, when it names one.
    public var originalTransactionId: String?

    public init(name: String, identity: NotificationIdentity, originalTransactionId: String? = nil) {
        self.name = name
        self.identity = identity
        self.originalTransactionId = originalTransactionId
    }

    /// The first part (by key, so the choice never depends on the order Apple wrote them in)
    /// of a decoded payload that is an object with a string `bundleId`; nil when none is.
    public static func find(in payload: [String: JSONValue]) -> NotificationOtherPart? {
        let known: Set<String> = ["data", "summary", "externalPurchaseToken", "appData"]
        for name in payload.keys.sorted() where !known.contains(name) {
            guard case .object(let part)? = payload[name], case .string(let bundleId)? = part["bundleId"] else { continue }
            var environment: AppStoreEnvironment? = nil
            if case .string(let text)? = part["environment"] { environment = AppStoreEnvironment(rawValue: text) }
            var appAppleId: Int64? = nil
            if case .number(let number)? = part["appAppleId"], let exact = Int64(exactly: number) { appAppleId = exact }
            var original: String? = nil
            if case .string(let text)? = part["originalTransactionId"] { original = text }
            return NotificationOtherPart(
                name: name, identity: NotificationIdentity(bundleId: bundleId, appAppleId: appAppleId, environment: environment),
                originalTransactionId: original)
        }
        return nil
    }
}
