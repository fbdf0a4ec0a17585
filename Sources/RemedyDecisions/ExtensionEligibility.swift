import Foundation
package import LedgerModel

/// Which subscriptions Apple refuses to extend by rule, decided from the ledger before anything is
/// sent (issue 62): an extension Apple refuses still spends a request, and each rule has its own
/// code. From Apple's article "Extending the renewal date for auto-renewable subscriptions" and the
/// error pages (endpoints-that-change.md §9): "Only active auto-renewable subscriptions with at
/// least one previously paid period" are eligible; not one "in a free offer period"
/// (SubscriptionExtensionIneligibleError, 4030004); not a family member's share
/// (FamilySharedSubscriptionExtensionIneligibleError, 4030007: the purchaser's extension extends
/// it); not an ASSIGNED (multiseat) subscription (AssignedSubscriptionExtensionIneligibleError,
/// 4030028: Apple says to check `inAppOwnershipType` first).
package enum ExtensionEligibility: String, CaseIterable, Hashable, Sendable, Codable {
    case familyShared = "family_shared"
    case assigned
    case freeOfferPeriod = "free_offer_period"
    case noPaidPeriod = "no_paid_period"

    /// What the ledger holds of one subscription for these rules.
    package struct Facts: Hashable, Sendable {
        /// The subscription's `inAppOwnershipType`.
        package var ownershipType: String?
        /// The current period's offer payment mode (`offerDiscountType` of its latest transaction).
        package var currentOfferDiscountType: String?
        /// Periods the customer paid for (transactions not in a free trial, of a price above 0 or unknown).
        package var paidPeriods: Int

        package init(ownershipType: String?, currentOfferDiscountType: String?, paidPeriods: Int) {
            self.ownershipType = ownershipType
            self.currentOfferDiscountType = currentOfferDiscountType
            self.paidPeriods = paidPeriods
        }

        /// The facts of a subscription's periods: the current one is the latest to expire (then
        /// to be bought; a date unknown counts as earliest), and a period was paid for unless it
        /// was a free trial or its price is 0 (Apple's "at least one previously paid period").
        /// A price the ledger does not know counts as paid: the tool's choice, not Apple's word,
        /// so that a ledger without prices (an old row, an import without them) still sends, and
        /// Apple's 4030004 answers what the ledger cannot tell.
        package init(ownershipType: String?, periods: [SubscriptionPeriod]) {
            let current = periods.max { earlier, later in
                (earlier.expiresDate ?? .distantPast, earlier.purchaseDate ?? .distantPast) < (later.expiresDate ?? .distantPast, later.purchaseDate ?? .distantPast)
            }
            self.init(
                ownershipType: ownershipType, currentOfferDiscountType: current?.offerDiscountType,
                paidPeriods: periods.count { $0.offerDiscountType != "FREE_TRIAL" && ($0.price ?? 1) > 0 }
            )
        }
    }

    /// The first rule by which Apple refuses to extend the subscription; nil: eligible.
    package static func refusal(_ facts: Facts) -> ExtensionEligibility? {
        switch facts.ownershipType {
        case "FAMILY_SHARED": return .familyShared
        case "ASSIGNED": return .assigned
        default: break
        }
        if facts.currentOfferDiscountType == "FREE_TRIAL" { return .freeOfferPeriod }
        if facts.paidPeriods < 1 { return .noPaidPeriod }
        return nil
    }

    /// Apple's error code for it.
    package var appleError: Int64 {
        switch self {
        case .familyShared: 4_030_007
        case .assigned: 4_030_028
        case .freeOfferPeriod, .noPaidPeriod: 4_030_004
        }
    }

    /// The report's words: why nothing was sent.
    package var detail: String {
        switch self {
        case .familyShared: "a family member's share (Family Sharing): Apple extends it only with the purchaser's subscription, so none was sent"
        case .assigned: "an ASSIGNED (multiseat) subscription: Apple refuses to extend it (4030028), so none was sent"
        case .freeOfferPeriod: "in a free offer period: Apple refuses to extend it (4030004), so none was sent"
        case .noPaidPeriod: "no paid period yet: Apple extends only subscriptions with at least one (4030004), so none was sent"
        }
    }
}
