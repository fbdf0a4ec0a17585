import Decisions
import SignedData
import Testing

/// Which App Store's verifier a notification goes to when one `serve` receives several: pure.
@Suite("NotificationRoute: one serve, several App Stores")
struct NotificationRouteTests {
    static let oneProduction = AppStorePair(bundleId: "com.example.one", environment: .production)
    static let oneSandbox = AppStorePair(bundleId: "com.example.one", environment: .sandbox)
    static let two = AppStorePair(bundleId: "com.example.two", environment: .production)

    @Test func aClaimedConfiguredAppStoreIsChosenAndAnyOtherIsUnconfigured() {
        let configured = [Self.oneProduction, Self.oneSandbox, Self.two]
        #expect(NotificationRoute.choose(claimed: Self.oneSandbox, configured: configured) == .pair(Self.oneSandbox))
        #expect(NotificationRoute.choose(claimed: Self.two, configured: configured) == .pair(Self.two))
        let other = AppStorePair(bundleId: "com.example.other", environment: .sandbox)
        #expect(NotificationRoute.choose(claimed: other, configured: configured) == .unconfigured(claimed: other))
        #expect(NotificationRoute.choose(claimed: nil, configured: configured) == .unconfigured(claimed: nil))
    }

    @Test func withOneAppStoreEveryNotificationIsItsOwnSoItsVerifierNamesWhatIsWrong() {
        let other = AppStorePair(bundleId: "com.example.other", environment: .sandbox)
        #expect(NotificationRoute.choose(claimed: other, configured: [Self.two]) == .pair(Self.two))
        #expect(NotificationRoute.choose(claimed: nil, configured: [Self.two]) == .pair(Self.two))
    }

    @Test func aGenuinePayloadOfAnotherAppStoreIsRejectedNamingItAndAForgeryKeepsItsReason() {
        let configured = [Self.oneProduction, Self.two]
        let identity = Rejection(.wrongBundle, "bundleId is \"x\", expected \"com.example.one\"")
        let otherApp = NotificationRoute.rejection(
            unconfigured: AppStorePair(bundleId: "com.example.other", environment: .production), judged: identity, configured: configured)
        #expect(otherApp.reason == .wrongBundle)
        #expect(otherApp.detail.contains("com.example.other Production") && otherApp.detail.contains("com.example.two Production"))
        // A configured app in an environment the deployment does not receive.
        let sandbox = NotificationRoute.rejection(unconfigured: Self.oneSandbox, judged: Rejection(.wrongEnvironment, ""), configured: configured)
        #expect(sandbox.reason == .wrongEnvironment && sandbox.detail.contains("com.example.one Sandbox"))
        // A signature that did not hold says so, whatever the payload claims.
        let forged = Rejection(.badSignature, "the ES256 signature does not verify")
        #expect(NotificationRoute.rejection(unconfigured: Self.oneSandbox, judged: forged, configured: configured).detail == forged.detail)
    }

    @Test func theClaimedAppStoreIsReadFromDataElseSummaryElseTheToken() {
        let data = NotificationPayload(
            notificationType: "DID_RENEW", notificationUUID: "u", data: NotificationData(bundleId: "com.example.one", environment: .sandbox))
        #expect(data.identity?.pair == Self.oneSandbox)
        let token = NotificationPayload(
            notificationType: "EXTERNAL_PURCHASE_TOKEN", notificationUUID: "u",
            externalPurchaseToken: ExternalPurchaseToken(externalPurchaseId: "SANDBOX_1", bundleId: "com.example.one"))
        #expect(token.identity?.pair == Self.oneSandbox)
        #expect(NotificationPayload(notificationType: "TEST", notificationUUID: "u").identity == nil)
    }
}
