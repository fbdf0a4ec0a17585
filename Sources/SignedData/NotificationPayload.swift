/// The decoded `signedPayload` of an App Store Server Notification V2
/// (Apple's `responseBodyV2DecodedPayload`). Exactly one of `data`, `summary`,
/// `externalPurchaseToken` and `appData` is present.
public struct NotificationPayload: Hashable, Sendable, Codable {
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    /// Unique per notification and unchanged across Apple's retries: the deduplication key.
    public var notificationUUID: String
    public var version: String?
    /// When Apple signed (created) the notification; unchanged across retries.
    public var signedDate: UnixMilliseconds?
    public var data: NotificationData?
    public var summary: RenewalExtensionSummary?
    public var externalPurchaseToken: ExternalPurchaseToken?
    public var appData: AppData?

    public init(
        notificationType: NotificationType, subtype: NotificationSubtype? = nil, notificationUUID: String,
        version: String? = "2.0", signedDate: UnixMilliseconds? = nil, data: NotificationData? = nil,
        summary: RenewalExtensionSummary? = nil, externalPurchaseToken: ExternalPurchaseToken? = nil,
        appData: AppData? = nil
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = version
        self.signedDate = signedDate
        self.data = data
        self.summary = summary
        self.externalPurchaseToken = externalPurchaseToken
        self.appData = appData
    }
}

/// `data` of a notification: the app's identity and the signed transaction and renewal info.
public struct NotificationData: Hashable, Sendable, Codable {
    /// Absent in the sandbox environment.
    public var appAppleId: Int64?
    public var bundleId: String?
    public var bundleVersion: String?
    public var environment: AppStoreEnvironment?
    public var signedTransactionInfo: String?
    /// Only for auto-renewable subscription notifications.
    public var signedRenewalInfo: String?
    /// Subscription status as of the notification's `signedDate` (auto-renewables only).
    public var status: SubscriptionStatus?
    /// Only for `CONSUMPTION_REQUEST`.
    public var consumptionRequestReason: String?

    public init(
        appAppleId: Int64? = nil, bundleId: String? = nil, bundleVersion: String? = nil,
        environment: AppStoreEnvironment? = nil, signedTransactionInfo: String? = nil,
        signedRenewalInfo: String? = nil, status: SubscriptionStatus? = nil,
        consumptionRequestReason: String? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.bundleVersion = bundleVersion
        self.environment = environment
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
        self.status = status
        self.consumptionRequestReason = consumptionRequestReason
    }
}

/// `summary` of a `RENEWAL_EXTENSION`/`SUMMARY` notification.
public struct RenewalExtensionSummary: Hashable, Sendable, Codable {
    public var environment: AppStoreEnvironment?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var productId: String?
    public var requestIdentifier: String?
    public var storefrontCountryCodes: [String]?
    public var succeededCount: Int64?
    public var failedCount: Int64?

    public init(
        environment: AppStoreEnvironment? = nil, appAppleId: Int64? = nil, bundleId: String? = nil,
        productId: String? = nil, requestIdentifier: String? = nil, storefrontCountryCodes: [String]? = nil,
        succeededCount: Int64? = nil, failedCount: Int64? = nil
    ) {
        self.environment = environment
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.productId = productId
        self.requestIdentifier = requestIdentifier
        self.storefrontCountryCodes = storefrontCountryCodes
        self.succeededCount = succeededCount
        self.failedCount = failedCount
    }
}

/// `externalPurchaseToken` of an `EXTERNAL_PURCHASE_TOKEN` notification. It has no
/// environment field: a sandbox token's `externalPurchaseId` starts with `SANDBOX`.
public struct ExternalPurchaseToken: Hashable, Sendable, Codable {
    public var externalPurchaseId: String?
    public var tokenCreationDate: UnixMilliseconds?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var tokenType: String?
    public var tokenExpirationDate: UnixMilliseconds?

    public init(
        externalPurchaseId: String? = nil, tokenCreationDate: UnixMilliseconds? = nil, appAppleId: Int64? = nil,
        bundleId: String? = nil, tokenType: String? = nil, tokenExpirationDate: UnixMilliseconds? = nil
    ) {
        self.externalPurchaseId = externalPurchaseId
        self.tokenCreationDate = tokenCreationDate
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.tokenType = tokenType
        self.tokenExpirationDate = tokenExpirationDate
    }

    /// The environment Apple's own verifier infers: Sandbox exactly when the ID starts with `SANDBOX`.
    public var inferredEnvironment: AppStoreEnvironment {
        (externalPurchaseId ?? "").hasPrefix("SANDBOX") ? .sandbox : .production
    }
}

/// `appData` of a `RESCIND_CONSENT` notification.
public struct AppData: Hashable, Sendable, Codable {
    /// Absent in the sandbox environment.
    public var appAppleId: Int64?
    public var bundleId: String?
    public var environment: AppStoreEnvironment?
    public var signedAppTransactionInfo: String?

    public init(
        appAppleId: Int64? = nil, bundleId: String? = nil, environment: AppStoreEnvironment? = nil,
        signedAppTransactionInfo: String? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.environment = environment
        self.signedAppTransactionInfo = signedAppTransactionInfo
    }
}
