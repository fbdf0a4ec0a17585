/// `notificationType` of an App Store Server Notification V2.
public struct NotificationType: ExtensibleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let subscribed: Self = "SUBSCRIBED"
    public static let didChangeRenewalPref: Self = "DID_CHANGE_RENEWAL_PREF"
    public static let didChangeRenewalStatus: Self = "DID_CHANGE_RENEWAL_STATUS"
    public static let offerRedeemed: Self = "OFFER_REDEEMED"
    public static let didRenew: Self = "DID_RENEW"
    public static let expired: Self = "EXPIRED"
    public static let didFailToRenew: Self = "DID_FAIL_TO_RENEW"
    public static let gracePeriodExpired: Self = "GRACE_PERIOD_EXPIRED"
    public static let priceIncrease: Self = "PRICE_INCREASE"
    public static let refund: Self = "REFUND"
    public static let refundDeclined: Self = "REFUND_DECLINED"
    public static let refundReversed: Self = "REFUND_REVERSED"
    public static let consumptionRequest: Self = "CONSUMPTION_REQUEST"
    public static let renewalExtended: Self = "RENEWAL_EXTENDED"
    public static let renewalExtension: Self = "RENEWAL_EXTENSION"
    public static let revoke: Self = "REVOKE"
    public static let test: Self = "TEST"
    public static let externalPurchaseToken: Self = "EXTERNAL_PURCHASE_TOKEN"
    public static let oneTimeCharge: Self = "ONE_TIME_CHARGE"
    public static let rescindConsent: Self = "RESCIND_CONSENT"
    public static let metadataUpdate: Self = "METADATA_UPDATE"
    public static let migration: Self = "MIGRATION"
    public static let priceChange: Self = "PRICE_CHANGE"
    /// Apple unclaimed seats of a group subscription with developer-hosted invitations
    /// (Notifications 2.23): `unclaimInfo` in place of `data`.
    public static let unclaimSeats: Self = "UNCLAIM_SEATS"

    /// Every type Apple documents, in the order of Apple's list.
    public static let documented: [Self] = [
        .subscribed, .didChangeRenewalPref, .didChangeRenewalStatus, .offerRedeemed, .didRenew,
        .expired, .didFailToRenew, .gracePeriodExpired, .priceIncrease, .refund, .refundDeclined,
        .consumptionRequest, .renewalExtended, .revoke, .test, .renewalExtension, .refundReversed,
        .externalPurchaseToken, .oneTimeCharge, .rescindConsent, .metadataUpdate, .migration,
        .priceChange, .unclaimSeats,
    ]
}

/// `subtype` of an App Store Server Notification V2. Absent (nil) for many notifications.
public struct NotificationSubtype: ExtensibleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let initialBuy: Self = "INITIAL_BUY"
    public static let resubscribe: Self = "RESUBSCRIBE"
    public static let downgrade: Self = "DOWNGRADE"
    public static let upgrade: Self = "UPGRADE"
    public static let autoRenewEnabled: Self = "AUTO_RENEW_ENABLED"
    public static let autoRenewDisabled: Self = "AUTO_RENEW_DISABLED"
    public static let voluntary: Self = "VOLUNTARY"
    public static let billingRetry: Self = "BILLING_RETRY"
    public static let priceIncrease: Self = "PRICE_INCREASE"
    public static let gracePeriod: Self = "GRACE_PERIOD"
    public static let pending: Self = "PENDING"
    public static let accepted: Self = "ACCEPTED"
    public static let billingRecovery: Self = "BILLING_RECOVERY"
    public static let productNotForSale: Self = "PRODUCT_NOT_FOR_SALE"
    public static let summary: Self = "SUMMARY"
    public static let failure: Self = "FAILURE"
    public static let unreported: Self = "UNREPORTED"
    public static let created: Self = "CREATED"
    public static let activeTokenReminder: Self = "ACTIVE_TOKEN_REMINDER"
    /// A REFUND of some seats of a group subscription: the transaction is not revoked, and Apple
    /// says not to revoke the purchaser's access for it (Notifications 2.23).
    public static let seats: Self = "SEATS"
}

extension NotificationType {
    /// The subtypes Apple documents for this type, and whether the type also occurs without a
    /// subtype. Get Notification History matches a type filter without a subtype only to
    /// notifications that have no subtype, so recovering a type completely takes one query per
    /// entry here (nil standing for "no subtype").
    public var documentedSubtypes: [NotificationSubtype?] {
        switch self {
        case .subscribed: [.initialBuy, .resubscribe]
        case .didRenew: [nil, .billingRecovery]
        case .didChangeRenewalPref: [nil, .upgrade, .downgrade]
        case .didChangeRenewalStatus: [.autoRenewEnabled, .autoRenewDisabled]
        case .offerRedeemed: [nil, .upgrade, .downgrade]
        case .expired: [nil, .voluntary, .billingRetry, .priceIncrease, .productNotForSale]
        case .didFailToRenew: [nil, .gracePeriod]
        case .priceIncrease: [.pending, .accepted]
        case .renewalExtension: [.summary, .failure]
        case .externalPurchaseToken: [.unreported, .created, .activeTokenReminder]
        case .refund: [nil, .seats]
        default: [nil]
        }
    }
}
