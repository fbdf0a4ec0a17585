package import Foundation

/// What a transaction's revocation is, from Apple's `revocationType` (App Store Server API 1.19,
/// December 2025: `REFUND_FULL`, `REFUND_PRORATED`, `FAMILY_REVOKE`), else, for a transaction
/// signed before Apple sent that field, from its `revocationReason` and ownership. Not every
/// revocation is a refund: Apple also revokes a purchase shared through Family Sharing when the
/// purchaser stops sharing or leaves the family, and a type Apple adds later (subscription
/// bundles, say) is named by its raw value, never counted as a refund.
package enum RevocationKind: Hashable, Sendable {
    /// `REFUND_FULL`: the whole transaction refunded.
    case fullRefund
    /// `REFUND_PRORATED`: part of it refunded; `revocationPercentage` in milliunits (67932: 67.932%).
    case proratedRefund(milliPercent: Int?)
    /// `FAMILY_REVOKE`: a Family Sharing member's access withdrawn; nothing refunded to them.
    case familySharingRevoked
    /// No `revocationType` (signed before Apple sent it): a purchase's refund.
    case refund
    /// No `revocationType`, a `FAMILY_SHARED` transaction: access withdrawn from a family member
    /// (the purchaser stopped sharing, left, or was refunded).
    case familySharingRevokedUntyped
    /// A `revocationType` this release does not know.
    case other(String)
    /// `isUpgraded` with a revocation date and neither a `revocationType` nor a
    /// `revocationReason`: the plan the customer upgraded from, which Apple's older records mark
    /// revoked at the upgrade (issue 62). Nothing was refunded: never counted or named a refund.
    case upgraded

    /// The kind of a revoked transaction; nil when it is not revoked.
    package init?(
        revocationDate: Date?, revocationType: String?, revocationPercentage: Int?, ownership: String?, revocationReason: Int? = nil, isUpgraded: Bool? = nil
    ) {
        guard revocationDate != nil else { return nil }
        if isUpgraded == true, revocationType == nil, revocationReason == nil {
            self = .upgraded
            return
        }
        switch revocationType {
        case "REFUND_FULL"?: self = .fullRefund
        case "REFUND_PRORATED"?: self = .proratedRefund(milliPercent: revocationPercentage)
        case "FAMILY_REVOKE"?: self = .familySharingRevoked
        case let type?: self = .other(type)
        case nil: self = ownership == "FAMILY_SHARED" ? .familySharingRevokedUntyped : .refund
        }
    }

    package init?(_ transaction: TransactionRecord) {
        self.init(
            revocationDate: transaction.revocationDate, revocationType: transaction.revocationType,
            revocationPercentage: transaction.revocationPercentage, ownership: transaction.inAppOwnershipType,
            revocationReason: transaction.revocationReason, isUpgraded: transaction.isUpgraded
        )
    }

    /// Whether money went back to the customer.
    package var isRefund: Bool {
        switch self {
        case .fullRefund, .proratedRefund, .refund: true
        case .familySharingRevoked, .familySharingRevokedUntyped, .other, .upgraded: false
        }
    }

    /// The stable name reports and the change feed give it.
    package var name: String {
        switch self {
        case .fullRefund: "full_refund"
        case .proratedRefund: "prorated_refund"
        case .familySharingRevoked, .familySharingRevokedUntyped: "family_sharing_revoked"
        case .refund: "refund"
        case .other(let type): "revoked:" + type
        case .upgraded: "upgraded"
        }
    }

    /// For people: "prorated refund (66.667%)".
    package var label: String {
        switch self {
        case .fullRefund: "full refund"
        case .proratedRefund(let milli?): "prorated refund (\(Self.percent(milli))%)"
        case .proratedRefund(nil): "prorated refund"
        case .familySharingRevoked, .familySharingRevokedUntyped: "Family Sharing revoked (no refund)"
        case .refund: "refund"
        case .other(let type): "revoked (\(type))"
        case .upgraded: "upgraded to another plan (no refund)"
        }
    }

    static func percent(_ milli: Int) -> String {
        let whole = milli / 1000
        let fraction = milli % 1000
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }

    /// The same decision in SQL, over a change-feed row's JSON (`after`): the change feed's
    /// `revocation` key (`ChangeFeed.read`). Generated from the cases above, so that both say
    /// the same.
    package static func sql(row: String) -> String {
        """
        CASE WHEN \(row) ->> 'revocation_ms' IS NULL THEN NULL
            WHEN (\(row) ->> 'is_upgraded')::boolean AND \(row) ->> 'revocation_type' IS NULL AND \(row) ->> 'revocation_reason' IS NULL
                THEN '\(RevocationKind.upgraded.name)'
            WHEN \(row) ->> 'revocation_type' = 'REFUND_FULL' THEN '\(RevocationKind.fullRefund.name)'
            WHEN \(row) ->> 'revocation_type' = 'REFUND_PRORATED' THEN '\(RevocationKind.proratedRefund(milliPercent: nil).name)'
            WHEN \(row) ->> 'revocation_type' = 'FAMILY_REVOKE' THEN '\(RevocationKind.familySharingRevoked.name)'
            WHEN \(row) ->> 'revocation_type' IS NOT NULL THEN 'revoked:' || (\(row) ->> 'revocation_type')
            WHEN \(row) ->> 'in_app_ownership_type' = 'FAMILY_SHARED' THEN '\(RevocationKind.familySharingRevokedUntyped.name)'
            ELSE '\(RevocationKind.refund.name)' END
        """
    }
}
