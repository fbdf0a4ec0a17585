package import AppStoreServerModel
package import LedgerModel
package import SignedData

/// What to do with one open refund request, decided from the team's facts before anything is
/// sent: the facts are the team's data, and an answer Apple refuses (400) spends the 12 hours.
package enum ConsumptionAnswer: Hashable, Sendable {
    /// Send this answer.
    case send(ConsumptionInformation)
    /// The facts query returned no row: nothing is sent (the team has nothing to say).
    case noFacts
    /// The customer did not consent (false or NULL): nothing may be sent (Apple answers
    /// InvalidCustomerConsentedError, 4000035, otherwise).
    case noConsent
    /// A value Apple's rules refuse, or more than one row: nothing is sent. `field` is the facts
    /// file's column (or `rows`), `reason` says what is wrong with it.
    case invalid(field: String, reason: String)
    /// Apple takes no answer about such a transaction (`ConsumptionAnswerRules.unsupported`):
    /// nothing is sent, and no person needs to act.
    case notSupported(ConsumptionAnswerRules.Unsupported)

    /// The outcome's name in the report and the metrics (`sent` is the answer once Apple took it).
    package var outcome: String {
        switch self {
        case .send: "sent"
        case .noFacts: "no_facts"
        case .noConsent: "no_consent"
        case .invalid: "invalid"
        case .notSupported: "not_supported"
        }
    }
}

/// Apple's rules for Send Consumption Information v2 (endpoints-that-change §2), applied to the
/// team's facts: the five delivery statuses, the three refund preferences, the percentage in
/// milliunits 0…100000, none for an auto-renewable subscription (Apple derives it from the time
/// elapsed), 0 for an undelivered purchase, and GRANT_PRORATED with a percentage strictly between
/// 0 and 100000 for any other product.
package enum ConsumptionAnswerRules {
    /// Transactions Apple refuses answers about by rule (issue 62; Send Consumption
    /// Information's 400 list, endpoints-that-change.md §9): decided from the ledger before the
    /// facts are read, so the 12 hours are not spent on a refusal.
    package enum Unsupported: String, Hashable, Sendable, CaseIterable {
        /// A family member's share: FamilyTransactionNotSupportedError (4000185).
        case familyShared = "family_shared"
        /// An ASSIGNED (multiseat) transaction: InvalidAssignedTransactionNotSupportedError (4000227).
        case assigned
        /// An Advanced Commerce API purchase (its transaction carries `advancedCommerceInfo`):
        /// AdvancedCommerceTransactionNotSupportedError (Send Consumption Information's 400 list;
        /// such purchases keep V1, App Store Server API changelog 1.19). Apple's pages give no number.
        case advancedCommerce = "advanced_commerce"

        package var appleError: Int64? {
            switch self {
            case .familyShared: 4_000_185
            case .assigned: 4_000_227
            case .advancedCommerce: nil
            }
        }

        package var detail: String {
            switch self {
            case .familyShared: "a family member's share (Family Sharing): Apple takes no consumption answer about it (4000185), so none was sent"
            case .assigned: "an ASSIGNED (multiseat) transaction: Apple takes no consumption answer about it (4000227), so none was sent"
            case .advancedCommerce:
                "an Advanced Commerce API purchase: Send Consumption Information takes no answer about it (AdvancedCommerceTransactionNotSupportedError), so none was sent; "
                    + "Apple takes answers about such purchases only through the deprecated Send Consumption Information V1, which this release does not send"
            }
        }
    }

    /// The rule by which Apple refuses an answer about a transaction of `ownershipType` (or an
    /// Advanced Commerce purchase), if any.
    package static func unsupported(ownershipType: String?, advancedCommerce: Bool = false) -> Unsupported? {
        switch ownershipType {
        case "FAMILY_SHARED": .familyShared
        case "ASSIGNED": .assigned
        default: advancedCommerce ? .advancedCommerce : nil
        }
    }

    /// The answer to a request about a purchase of `productType` (nil: the ledger does not know
    /// it), from the facts query's `rows`.
    package static func answer(rows: [ConsumptionFacts], productType: ProductType?) -> ConsumptionAnswer {
        guard let facts = rows.first else { return .noFacts }
        guard rows.count == 1 else { return .invalid(field: "rows", reason: "the facts query returned \(rows.count) rows for one request; it must return one at most") }
        guard facts.customerConsented == true else { return .noConsent }
        guard let status = facts.deliveryStatus else { return .invalid(field: "delivery_status", reason: "is NULL") }
        let deliveryStatus = DeliveryStatus(rawValue: status)
        guard DeliveryStatus.documented.contains(deliveryStatus) else {
            return .invalid(field: "delivery_status", reason: "is '\(status.prefix(40))', not one of \(DeliveryStatus.documented.map(\.rawValue).joined(separator: ", "))")
        }
        guard let sample = facts.sampleContentProvided else { return .invalid(field: "sample_content_provided", reason: "is NULL") }
        var preference: RefundPreference?
        if let text = facts.refundPreference {
            preference = RefundPreference(rawValue: text)
            guard RefundPreference.documented.contains(RefundPreference(rawValue: text)) else {
                return .invalid(field: "refund_preference", reason: "is '\(text.prefix(40))', not one of \(RefundPreference.documented.map(\.rawValue).joined(separator: ", "))")
            }
        }
        if let problem = percentageProblem(facts.consumptionPercentage, delivered: deliveryStatus == .delivered, preference: preference, productType: productType) {
            return .invalid(field: "consumption_percentage", reason: problem)
        }
        return .send(
            ConsumptionInformation(
                customerConsented: true, deliveryStatus: deliveryStatus, sampleContentProvided: sample,
                consumptionPercentage: facts.consumptionPercentage.map { Int32($0) }, refundPreference: preference
            )
        )
    }

    /// What is wrong with the percentage given (nil: nothing).
    static func percentageProblem(_ percentage: Int64?, delivered: Bool, preference: RefundPreference?, productType: ProductType?) -> String? {
        let autoRenewable = productType.map { $0 == .autoRenewable }
        if let percentage {
            guard (0...100_000).contains(percentage) else { return "is \(percentage): milliunits from 0 to 100000 (40% is 40000)" }
            switch autoRenewable {
            case true?: return "is given for an auto-renewable subscription: Apple derives it from the time elapsed, so it must be NULL"
            case nil: return "cannot be checked: the ledger does not know the purchase's product type (an auto-renewable subscription takes none)"
            case false?: break
            }
            if !delivered, percentage != 0 { return "is \(percentage) for a purchase not delivered: it must be 0" }
        }
        if preference == .grantProrated, autoRenewable != true {
            guard let percentage, percentage > 0, percentage < 100_000 else {
                return "must be strictly between 0 and 100000 with refund_preference GRANT_PRORATED"
            }
        }
        return nil
    }
}
