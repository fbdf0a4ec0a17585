package import LedgerModel
package import SignedData

/// What the tool does with each of Apple's notification types, in one table: every other file
/// asks here instead of keeping a list of type names. A new type Apple documents is a case in
/// `NotificationType` and a row below (`NotificationTypePolicyTests` fails until it has one).
package struct NotificationTypePolicy: Hashable, Sendable {
    /// What the notification says of the customer's access to the product.
    package enum Access: Hashable, Sendable {
        /// Paid for, renewed, restored, extended: access begins or continues.
        case grants
        /// Expired, refunded, revoked: access ends.
        case withdraws
        /// Says nothing about access (a preference, a price, a request, a summary).
        case unchanged
    }

    /// When a missed notification that grants access began to deny it (`compensate`, issue 62).
    package enum DenialStart: Hashable, Sendable {
        /// It never removed access: the customer had it before and after (an offer redeemed by
        /// "a customer with an active subscription", a renewal date extended, a renewal
        /// preference changed: Apple's pages for each type).
        case never
        /// Access began with it: missing it denied from its signing (a new subscription, a
        /// refund reversed).
        case signedDate
        /// It continued access the ledger already granted: missing it denied only once that
        /// access ended (a renewal, which Apple charges in the 24 hours before the period ends:
        /// until the old expiry, or a billing grace period's end, the ledger still granted it).
        case endOfAccessHeld
    }

    /// Whether a notification of this type, recovered (or, in the refund flow, recorded live),
    /// leaves the account's rows in doubt, so that pass 2 asks Apple (`RecoveryEvidence`).
    package enum Doubt: Hashable, Sendable {
        /// Its payload determines the rows it is about: the transaction Apple signed, the
        /// renewal info and the status, applied as they are.
        case none
        /// A refund request: in doubt until a decision of its episode (REFUND, REFUND_DECLINED)
        /// signed after it is recorded. The decision may be the notification that was lost.
        case untilDecided
        /// About a one-time purchase, in doubt: a refund or a revocation of a non-consumable may
        /// come with copies (a restored purchase) no notification names. About a subscription,
        /// its payload carries the revoked transaction, the renewal info and the status.
        case forOneTimePurchases
        /// The tool does not know what it determines (a type Apple does not document yet).
        case always
    }

    /// Recovered first in pass 1 (one query per documented subtype) before the unfiltered pass:
    /// what a backend's access decisions and Apple's deadlines depend on most.
    package var priorityInPassOne = false
    /// About the transaction a refund request concerns, not the account's latest: selects the
    /// account for its transaction history, recorded live or recovered.
    package var refundFlow = false
    /// Its role in a refund request's episode (`app_store.refund_request_events`).
    package var refundEpisode: RefundEpisodeRole? = nil
    /// Its recovery asks Apple for the account's transaction history, not only its statuses.
    package var needsTransactionHistory = false
    /// Explains a lapse between two subscription periods (`TransactionChainGap`).
    package var explainsLapse = false
    /// Apple waits for an answer within a deadline (12 hours from its first send attempt).
    package var carriesDeadline = false
    /// Apple extended one subscription's renewal date: one of the two extensions Apple allows a
    /// subscription in 365 days (`compensate` counts these beside its own requests).
    package var extendsRenewalDate = false
    /// What it says of access, by default (`access(subtype:)` refines it by subtype).
    package var access = Access.unchanged
    /// When missing it began to deny access, for a type that grants it (any subtype).
    package var denialStart = DenialStart.never
    /// Whether recovering it leaves the account's rows in doubt (pass 2 by evidence).
    package var leavesDoubt = Doubt.none

    /// What a notification of this type and subtype says of access: an upgrade grants the new
    /// product at once, a renewal failure in a grace period keeps access.
    package func access(type: NotificationType, subtype: NotificationSubtype?) -> Access {
        switch (type, subtype) {
        case (.didChangeRenewalPref, .upgrade?), (.offerRedeemed, .upgrade?): .grants
        case (.didFailToRenew, .gracePeriod?): .unchanged
        // Some seats refunded; "don't revoke the group purchaser's access because of this value".
        case (.refund, .seats?): .unchanged
        default: access
        }
    }
}

extension NotificationTypePolicy {
    /// The table, by type. Types Apple does not document (yet) get `unknown`.
    package static let table: [NotificationType: NotificationTypePolicy] = [
        .subscribed: .init(access: .grants, denialStart: .signedDate),
        .didChangeRenewalPref: .init(),
        .didChangeRenewalStatus: .init(),
        .offerRedeemed: .init(access: .grants),
        .didRenew: .init(priorityInPassOne: true, access: .grants, denialStart: .endOfAccessHeld),
        .expired: .init(priorityInPassOne: true, explainsLapse: true, access: .withdraws),
        .didFailToRenew: .init(explainsLapse: true, access: .withdraws),
        .gracePeriodExpired: .init(explainsLapse: true, access: .withdraws),
        .priceIncrease: .init(),
        .refund: .init(
            refundFlow: true, refundEpisode: .decision, needsTransactionHistory: true, explainsLapse: true, access: .withdraws,
            leavesDoubt: .forOneTimePurchases),
        .refundDeclined: .init(refundFlow: true, refundEpisode: .decision, needsTransactionHistory: true),
        .consumptionRequest: .init(
            priorityInPassOne: true, refundFlow: true, refundEpisode: .request, needsTransactionHistory: true, carriesDeadline: true,
            leavesDoubt: .untilDecided),
        .renewalExtended: .init(extendsRenewalDate: true, access: .grants),
        .revoke: .init(needsTransactionHistory: true, explainsLapse: true, access: .withdraws, leavesDoubt: .forOneTimePurchases),
        .test: .init(),
        .renewalExtension: .init(),
        .refundReversed: .init(
            refundFlow: true, needsTransactionHistory: true, access: .grants, denialStart: .signedDate, leavesDoubt: .forOneTimePurchases),
        .externalPurchaseToken: .init(),
        .oneTimeCharge: .init(needsTransactionHistory: true, access: .grants, denialStart: .signedDate),
        .rescindConsent: .init(),
        .metadataUpdate: .init(),
        .migration: .init(),
        .priceChange: .init(),
        // Seats the tool does not keep (the team's backend assigns them): recorded, changes nothing.
        .unclaimSeats: .init(),
    ]

    /// A type outside Apple's documented list: recovered by the unfiltered pass, and pass 2 asks
    /// Apple about its account.
    package static let unknown = NotificationTypePolicy(leavesDoubt: .always)

    /// The documented types whose policy has `property`, in Apple's order.
    package static func types(_ property: (NotificationTypePolicy) -> Bool) -> [NotificationType] {
        NotificationType.documented.filter { property($0.policy) }
    }

    /// The same, as the ledger stores them (`app_store.notifications.notification_type`).
    package static func names(_ property: (NotificationTypePolicy) -> Bool) -> [String] {
        types(property).map(\.rawValue)
    }
}

extension NotificationType {
    /// This type's row of `NotificationTypePolicy.table`.
    package var policy: NotificationTypePolicy { NotificationTypePolicy.table[self] ?? .unknown }
}

extension NotificationTypePolicy {
    /// The lists pass 2's selections in the ledger take.
    package static let recoveredTypes = RecoveredTypes(
        needingTransactionHistory: names(\.needsTransactionHistory), refundFlow: names(\.refundFlow),
        refundDecisions: types { $0.refundEpisode == .decision }.map(\.rawValue))
}
