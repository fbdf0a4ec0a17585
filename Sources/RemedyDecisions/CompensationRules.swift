import AppStoreServerModel
import Crypto
import Decisions
package import Foundation
package import LedgerModel
package import SignedData

/// Who an outage hurt and what each gets (`compensate`), as pure rules: a subscription is hurt
/// when a notification that grants access (`NotificationTypePolicy`'s `.grants`, by type and
/// subtype) was signed in the window and recovered by a run (the live server missed it), the
/// ledger denied access for at least the minimum hours (from when missing it began to deny, its
/// type's `DenialStart`, to the earlier of its recording and a later grant the live server
/// received), and the ledger holds the subscription active now. Each gets ceil(hours denied / 24) days, or the days given, within Apple's 1…90.
package enum CompensationRules {
    /// The notification types that may grant access (some only with a subtype: the ledger
    /// selects by these, `grants(type:subtype:)` decides).
    package static var typesThatMayGrant: [String] { NotificationType.documented.filter(mayGrant).map(\.rawValue) }

    /// Apple extends one subscription's renewal date at most twice in 365 days (Extend a
    /// Subscription Renewal Date: SubscriptionMaxExtensionError, 4030005).
    package static let extensionsAllowedIn365Days = 2

    /// What the ledger's facts say of a subscription's extensions at `now`, for the request
    /// `requestIdentifier` compensating `missed`: in the last 365 days, the larger of the tool's
    /// own other requests that extended or may have (pending) and Apple's notifications that it
    /// extended one (the same extension may be both, or either alone: another tool, or a
    /// notification the ledger lacks); and whether another request compensated one of `missed`.
    package static func history(_ facts: ExtensionFacts, requestIdentifier: UUID, missed: [UUID], now: Date) -> ExtensionHistory {
        let yearAgo = now.addingTimeInterval(-365 * 86_400)
        let others = facts.requests.filter { $0.requestIdentifier != requestIdentifier && mayHaveExtended(outcome: $0.outcome) }
        let own = others.count { $0.requestedAt > yearAgo }
        let notified = facts.extendedByApple.count { $0 > yearAgo }
        let elsewhere = others.contains { !Set($0.notificationUUIDs).isDisjoint(with: missed) }
        return ExtensionHistory(inLastYear: max(own, notified), earlier: facts.earlier, compensatedElsewhere: elsewhere)
    }

    /// Whether a request with this outcome extended the subscription, or may have: Apple took it
    /// (`extended`), or its answer never came (`pending`). Refused, not sent, skipped: it did not.
    package static func mayHaveExtended(outcome: String) -> Bool { outcome == "extended" || outcome == "pending" }

    /// The types that record an extension of one subscription's renewal date, counted against
    /// Apple's two in 365 days.
    package static var typesThatExtend: [String] { NotificationTypePolicy.names(\.extendsRenewalDate) }

    /// The types of an auto-renewable subscription whose absence, missed, denied access (compensate's
    /// help names them): those that grant and began denying when missed. A one-time charge is about
    /// other products than auto-renewable subscriptions.
    package static var typesThatDeny: [String] {
        NotificationType.documented.filter { $0 != .oneTimeCharge && $0.policy.denialStart != .never && mayGrant($0) }.map(\.rawValue)
    }

    /// The types that may grant access but never denied it when missed: they come while the
    /// customer has access.
    package static var typesThatNeverDeny: [String] {
        NotificationType.documented.filter { $0.policy.denialStart == .never && mayGrant($0) }.map(\.rawValue)
    }

    private static func mayGrant(_ type: NotificationType) -> Bool {
        type.policy.access == .grants || type.documentedSubtypes.contains { type.policy.access(type: type, subtype: $0) == .grants }
    }

    /// The types whose default is to grant: a later one the live server received gave access back.
    package static var typesThatGrant: [String] { NotificationTypePolicy.names { $0.access == .grants } }

    /// Whether this notification grants access.
    package static func grants(type: String, subtype: String?) -> Bool {
        let type = NotificationType(rawValue: type)
        return type.policy.access(type: type, subtype: subtype.map(NotificationSubtype.init(rawValue:))) == .grants
    }

    /// The days for `hoursDenied`: `fixed` when given, else ceil(hours / 24); within 1…90.
    package static func days(hoursDenied: Double, fixed: Int?) -> Int {
        let days = fixed ?? Int((hoursDenied / 24).rounded(.up))
        return min(Int(ExtendRenewalDateRequest.days.upperBound), max(Int(ExtendRenewalDateRequest.days.lowerBound), days))
    }

    /// The requestIdentifier of one subscription's extension for one window: a name-based UUID
    /// (version 8, from SHA-256) of the app, environment, originalTransactionId and the window's
    /// bounds in milliseconds, so that compensating the same window again sends the same one.
    package static func requestIdentifier(bundleId: String, environment: AppStoreEnvironment, originalTransactionId: String, start: Date, end: Date) -> UUID {
        nameBased("renewal-extension\n\(bundleId)\n\(environment.rawValue)\n\(originalTransactionId)\n\(milliseconds(start))\n\(milliseconds(end))")
    }

    /// The requestIdentifier of a mass extension: of the app, environment, product and the
    /// intent's key (the window's bounds) only (issue 62), so that asking again with other days is
    /// the same request (followed, not sent again) rather than a second extension of everyone.
    package static func massRequestIdentifier(bundleId: String, environment: AppStoreEnvironment, productId: String, intent: String) -> UUID {
        nameBased("mass-extension\n\(bundleId)\n\(environment.rawValue)\n\(productId)\n\(intent)")
    }

    /// The intent's key of the mass extension for the outage [start, end): its bounds in
    /// milliseconds ("1764547200000-1764568800000"), whatever the days asked.
    package static func massIntent(start: Date, end: Date) -> String { "\(milliseconds(start))-\(milliseconds(end))" }

    /// The days Extend a Subscription Renewal Date takes (`extendByDays`: 1 to 90).
    package static var allowedDays: ClosedRange<Int> { Int(ExtendRenewalDateRequest.days.lowerBound)...Int(ExtendRenewalDateRequest.days.upperBound) }

    /// The requestIdentifier of the single extension sent to a subscriber a mass extension could
    /// not extend (Apple's RENEWAL_EXTENSION/FAILURE): of the mass request and the subscription.
    package static func failureRetryIdentifier(massRequestIdentifier: UUID, originalTransactionId: String) -> UUID {
        nameBased("mass-failure-retry\n\(massRequestIdentifier.uuidString.lowercased())\n\(originalTransactionId)")
    }

    /// A subscriber a mass extension could not extend, to retry with a single extension, as
    /// Apple's article "Extending the renewal date for auto-renewable subscriptions" says ("Retry
    /// attempts that fail": take the originalTransactionId of each RENEWAL_EXTENSION/FAILURE and
    /// call Extend a Subscription Renewal Date): nil when it is no longer active (Apple extends
    /// only active subscriptions); Apple's eligibility rules still apply (`ineligible`).
    package static func failureRetry(_ failure: MissedGrant, now: Date) -> Hurt? {
        guard failure.status == 1, let expires = failure.expiresDate, expires > now else { return nil }
        return Hurt(
            originalTransactionId: failure.originalTransactionId, productId: failure.productId, notificationUUID: failure.notificationUUID,
            notificationType: failure.notificationType, signedDate: failure.signedDate, hoursDenied: 0, expiresDate: expires,
            ineligible: ExtensionEligibility.refusal(
                .init(ownershipType: failure.ownershipType, periods: failure.periods)),
            notificationUUIDs: [failure.notificationUUID]
        )
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    static func nameBased(_ name: String) -> UUID {
        var bytes = Array(SHA256.hash(data: Data(name.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// One hurt subscription.
    package struct Hurt: Sendable, Hashable {
        package var originalTransactionId: String
        package var productId: String?
        /// The missed notification that denied longest.
        package var notificationUUID: UUID
        package var notificationType: String
        package var signedDate: Date
        package var hoursDenied: Double
        package var expiresDate: Date?
        /// The rule by which Apple refuses to extend it, if any (`ExtensionEligibility`): listed
        /// and skipped, never sent.
        package var ineligible: ExtensionEligibility?
        /// Every granting notification of the subscription missed in the window.
        package var notificationUUIDs: [UUID] = []
    }

    /// When missing `grant` began to deny access, by its type's `DenialStart`; nil when it
    /// never did. A renewal denies from the later of its signing and the end of the access the
    /// ledger held: Apple "starts trying to automatically renew" during the 24 hours before the
    /// subscription expires (Apple's guide, quoted in https://developer.apple.com/forums/thread/72214)
    /// and signs DID_RENEW when the charge succeeds; Apple's notificationType page: DID_RENEW
    /// continues access, OFFER_REDEEMED is for "a customer with an active subscription",
    /// RENEWAL_EXTENDED extends an active one (endpoints-that-change.md §9).
    package static func denialStart(of grant: MissedGrant) -> Date? {
        let type = NotificationType(rawValue: grant.notificationType)
        switch type.policy.denialStart {
        case .never: return nil
        case .signedDate: return grant.signedDate
        case .endOfAccessHeld: return max(grant.signedDate, grant.accessHeldUntil ?? grant.signedDate)
        }
    }

    /// The missed notifications that grant access but were recorded (or followed by a grant the
    /// live server received) before the access the ledger held ended: a renewal Apple charged
    /// early and the run recorded before the old period ran out. They denied nothing.
    package static func deniedNothing(_ missed: [MissedGrant]) -> Int {
        missed.count { grant in
            guard grants(type: grant.notificationType, subtype: grant.subtype), denialStart(of: grant) != nil else { return false }
            return hoursDenied(by: grant) == 0
        }
    }

    /// The hours `grant` denied access: from `denialStart` to the earlier of its recording and a
    /// later grant the live server received; nil when it never denied.
    package static func hoursDenied(by grant: MissedGrant) -> Double? {
        guard grants(type: grant.notificationType, subtype: grant.subtype), let start = denialStart(of: grant) else { return nil }
        let until = min(grant.recordedAt, grant.grantedLiveAt ?? grant.recordedAt)
        return max(0, until.timeIntervalSince(start) / 3600)
    }

    /// The hurt subscriptions among `missed`, by originalTransactionId: granting notifications
    /// that denied access (`hoursDenied`); the longest denial of each subscription; at least
    /// `minimumHours`; active now.
    package static func hurt(_ missed: [MissedGrant], minimumHours: Double, now: Date) -> [Hurt] {
        var bySubscription: [String: Hurt] = [:]
        for grant in missed {
            guard let hours = hoursDenied(by: grant), hours > 0 else { continue }
            guard grant.status == 1, let expires = grant.expiresDate, expires > now else { continue }
            guard hours >= minimumHours else { continue }
            let all = (bySubscription[grant.originalTransactionId]?.notificationUUIDs ?? []) + [grant.notificationUUID]
            if let known = bySubscription[grant.originalTransactionId], known.hoursDenied >= hours {
                bySubscription[grant.originalTransactionId]?.notificationUUIDs = all
                continue
            }
            bySubscription[grant.originalTransactionId] = Hurt(
                originalTransactionId: grant.originalTransactionId, productId: grant.productId, notificationUUID: grant.notificationUUID,
                notificationType: grant.notificationType, signedDate: grant.signedDate, hoursDenied: hours, expiresDate: expires,
                ineligible: ExtensionEligibility.refusal(
                    .init(ownershipType: grant.ownershipType, periods: grant.periods)),
                notificationUUIDs: all
            )
        }
        return bySubscription.values.sorted { $0.originalTransactionId < $1.originalTransactionId }
    }
}
