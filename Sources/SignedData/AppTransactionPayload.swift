/// A decoded signed app transaction (Apple's `JWSAppTransactionDecodedPayload`), carried in a
/// `RESCIND_CONSENT` notification's `appData`. Its environment is `receiptType`, and its
/// effective signing time `receiptCreationDate`.
public struct AppTransactionPayload: Hashable, Sendable, Codable {
    public var receiptType: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var applicationVersion: String?
    public var versionExternalIdentifier: Int64?
    public var receiptCreationDate: UnixMilliseconds?
    public var originalPurchaseDate: UnixMilliseconds?
    public var originalApplicationVersion: String?
    public var deviceVerification: String?
    public var deviceVerificationNonce: String?
    public var preorderDate: UnixMilliseconds?
    public var appTransactionId: String?
    public var originalPlatform: String?
    public var signedDate: UnixMilliseconds?

    public init(bundleId: String? = nil) {
        self.bundleId = bundleId
    }
}
