package import Foundation

/// One period of a subscription as the ledger holds it: a transaction's offer payment mode,
/// price and dates, which Apple's eligibility rules for an extension read.
package struct SubscriptionPeriod: Sendable, Hashable, Codable {
    /// `offerDiscountType`: FREE_TRIAL, PAY_AS_YOU_GO, PAY_UP_FRONT, ONE_TIME; nil without an offer.
    package var offerDiscountType: String?
    /// In milliunits of its currency; nil unknown.
    package var price: Int64?
    package var purchaseDate: Date?
    package var expiresDate: Date?

    package init(offerDiscountType: String? = nil, price: Int64? = nil, purchaseDate: Date? = nil, expiresDate: Date? = nil) {
        self.offerDiscountType = offerDiscountType
        self.price = price
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
    }

    /// The JSON the ledger's queries give the periods in (`SubscriptionPeriod.sql`): dates in
    /// seconds since 1970.
    package static func decode(json: String) throws -> [SubscriptionPeriod] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode([SubscriptionPeriod].self, from: Data(json.utf8))
    }
}

/// A notification a run recovered (source `history`, so the live server missed it) in a window,
/// of a type that may grant access, with the subscription it is about as the ledger holds it now:
/// what `compensate` decides from (`CompensationRules` in RemedyDecisions).
package struct MissedGrant: Sendable, Hashable {
    package var originalTransactionId: String
    package var notificationUUID: UUID
    package var notificationType: String
    package var subtype: String?
    package var signedDate: Date
    /// When the ledger recorded it.
    package var recordedAt: Date
    /// When the ledger first gave access again, if before `recordedAt`: the recording of a later
    /// notification the live server received that grants access (nil: none).
    package var grantedLiveAt: Date?
    /// The subscription now: its product, Apple's status (1 active…) and expiry.
    package var productId: String?
    package var status: Int?
    package var expiresDate: Date?
    /// `inAppOwnershipType`: FAMILY_SHARED for a family member's share of another's purchase.
    package var ownershipType: String?
    /// Until when the ledger granted access before this notification (issue 62): the grace
    /// period's end when the subscription was in one (the change feed's `before` of this
    /// notification), else the expiry of the subscription's previous transaction; nil unknown.
    package var accessHeldUntil: Date?
    /// The subscription's periods in the ledger (its transactions), for Apple's eligibility rules
    /// (`ExtensionEligibility`); by default one of unknown offer and price.
    package var periods = [SubscriptionPeriod()]

    package init(
        originalTransactionId: String, notificationUUID: UUID, notificationType: String, subtype: String?, signedDate: Date, recordedAt: Date,
        grantedLiveAt: Date?, productId: String?, status: Int?, expiresDate: Date?, ownershipType: String? = nil, accessHeldUntil: Date? = nil
    ) {
        self.ownershipType = ownershipType
        self.accessHeldUntil = accessHeldUntil
        self.originalTransactionId = originalTransactionId
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.signedDate = signedDate
        self.recordedAt = recordedAt
        self.grantedLiveAt = grantedLiveAt
        self.productId = productId
        self.status = status
        self.expiresDate = expiresDate
    }
}

/// What the ledger holds of one subscription's extensions, facts only: every request the tool
/// made for it, the signing dates of Apple's notifications that it extended the renewal date,
/// and the row of the request at hand. `CompensationRules.history` decides from them.
package struct ExtensionFacts: Sendable, Hashable {
    /// One request of `app_store.renewal_extensions` for the subscription.
    package struct Request: Sendable, Hashable {
        package var requestIdentifier: UUID
        package var outcome: String
        package var requestedAt: Date
        /// The missed notifications it compensated.
        package var notificationUUIDs: [UUID]

        package init(requestIdentifier: UUID, outcome: String, requestedAt: Date, notificationUUIDs: [UUID]) {
            self.requestIdentifier = requestIdentifier
            self.outcome = outcome
            self.requestedAt = requestedAt
            self.notificationUUIDs = notificationUUIDs
        }
    }

    package var requests: [Request]
    /// When Apple signed each notification saying it extended the subscription's renewal date.
    package var extendedByApple: [Date]
    /// The row of the request at hand, if an earlier compensate wrote one.
    package var earlier: RenewalExtensionRecord?

    package init(requests: [Request], extendedByApple: [Date], earlier: RenewalExtensionRecord?) {
        self.requests = requests
        self.extendedByApple = extendedByApple
        self.earlier = earlier
    }
}

/// What `compensate` concludes of a subscription's extensions (`CompensationRules.history`): how
/// many in the last 365 days, whether another request compensated the same missed notification,
/// and the row of this very request, if any.
package struct ExtensionHistory: Sendable, Hashable {
    package var inLastYear: Int
    package var earlier: RenewalExtensionRecord?
    /// Another request (another window's compensate) extended, or may have extended, the
    /// subscription for one of the same missed notifications.
    package var compensatedElsewhere: Bool

    package init(inLastYear: Int, earlier: RenewalExtensionRecord?, compensatedElsewhere: Bool = false) {
        self.inLastYear = inLastYear
        self.earlier = earlier
        self.compensatedElsewhere = compensatedElsewhere
    }

    /// The other remedy (a mass extension) that made the subscription's product good for an
    /// overlapping window, described (`RemedyExclusion`); nil: none, or `--again`.
    package var otherRemedy: String?
}

/// One row of `app_store.renewal_extensions` (migration 0026): one subscription's extension for
/// one window, whatever came of it.
package struct RenewalExtensionRecord: Sendable, Hashable, Codable {
    package var originalTransactionId: String
    package var requestIdentifier: UUID
    /// The missed notification the extension makes good for (the longest denial), and every
    /// missed notification of the subscription in the window.
    package var notificationUUID: UUID?
    package var notificationUUIDs: [UUID] = []
    package var extendByDays: Int
    package var reasonCode: Int
    /// extended, refused, skipped (a third in 365 days: not sent), pending (sent with no answer,
    /// or not sent yet: the next compensate of the window sends it again, same identifier).
    package var outcome: String
    package var effectiveDate: Date?
    package var hoursDenied: Double
    package var appleStatus: Int?
    package var appleError: Int64?
    package var detail: String?

    package init(
        originalTransactionId: String, requestIdentifier: UUID, notificationUUID: UUID? = nil, notificationUUIDs: [UUID] = [], extendByDays: Int, reasonCode: Int, outcome: String,
        effectiveDate: Date? = nil, hoursDenied: Double, appleStatus: Int? = nil, appleError: Int64? = nil, detail: String? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.notificationUUID = notificationUUID
        self.notificationUUIDs = notificationUUIDs
        self.requestIdentifier = requestIdentifier
        self.extendByDays = extendByDays
        self.reasonCode = reasonCode
        self.outcome = outcome
        self.effectiveDate = effectiveDate
        self.hoursDenied = hoursDenied
        self.appleStatus = appleStatus
        self.appleError = appleError
        self.detail = detail
    }

    package static let outcomes = ["extended", "refused", "skipped", "pending", "not_sent"]
    /// Outcomes no later compensate of the window changes.
    package var isFinal: Bool { outcome == "extended" || outcome == "refused" }
}

/// One row of `app_store.mass_extensions`: a mass extension of one product, followed to its end.
package struct MassExtensionRecord: Sendable, Hashable, Codable {
    package var productId: String
    /// The outage's window it makes good (migration 0028).
    package var windowStart: Date?
    package var windowEnd: Date?
    package var requestIdentifier: UUID
    package var extendByDays: Int
    package var reasonCode: Int
    package var requestedAt: Date
    package var complete: Bool
    package var completeDate: Date?
    package var succeededCount: Int64?
    package var failedCount: Int64?

    package init(
        productId: String, requestIdentifier: UUID, extendByDays: Int, reasonCode: Int, requestedAt: Date, complete: Bool = false, completeDate: Date? = nil,
        succeededCount: Int64? = nil, failedCount: Int64? = nil
    ) {
        self.productId = productId
        self.requestIdentifier = requestIdentifier
        self.extendByDays = extendByDays
        self.reasonCode = reasonCode
        self.requestedAt = requestedAt
        self.complete = complete
        self.completeDate = completeDate
        self.succeededCount = succeededCount
        self.failedCount = failedCount
    }
}
