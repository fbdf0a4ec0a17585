/// The payloads a verified JWS is decoded into, with a fast path for their plain shape
/// (`SimpleJSONObject`). Each fast initializer sets the fields exactly as the synthesized
/// `Decodable` conformance would and returns nil (so that `JSONDecoder` decides) for anything
/// else: a value of another type, a key given twice, a missing required field, or a field whose
/// value the fast path does not read (`advancedCommerceInfo` and `commitmentInfo` other than
/// null). Keys it does not know are ignored, as `JSONDecoder` ignores them.
/// `PayloadFastDecodingTests` checks every field of every type against `JSONDecoder`.
///
/// Why the fields are spelled here a second time (beside the payload types' `Decodable`): reading
/// a notification through `JSONDecoder` cost 30 µs of the 220 µs pass 1 spent on each
/// notification (docs/performance.md), and a run reads millions. The second spelling cannot drift
/// silently: the test fills every stored property of every payload type, found by reflection,
/// and fails on a field the fast path forgets or reads otherwise than `JSONDecoder`.
protocol FastDecodable: Decodable {
    init?(simple object: SimpleJSONObject)
}

extension FastDecodable {
    /// The payload read on the fast path, or nil when `JSONDecoder` must decide.
    static func decodeFast(_ bytes: [UInt8]) -> Self? {
        SimpleJSONObject.parse(bytes).flatMap(Self.init(simple:))
    }
}

extension SimpleJSONObject {
    /// Offers each field, in order, to `read`, which returns whether the fast path accepts it;
    /// false as soon as one is declined. `SeenFields` turns a key given twice into a decline.
    func readFields(_ read: (_ key: String, _ value: Value, _ seen: inout SeenFields) -> Bool) -> Bool {
        var seen = SeenFields()
        for (key, value) in fields {
            guard read(key, value, &seen) else { return false }
        }
        return true
    }
}

extension SeenFields {
    /// Sets an optional field from a value read for it; false (decline) when the key came
    /// before or the value is of another type.
    mutating func assign<Value>(_ field: inout Value?, _ read: Value??, _ index: Int) -> Bool {
        guard first(index), let read else { return false }
        field = read
        return true
    }

    /// Accepts only null for a field the fast path does not read.
    mutating func onlyNull(_ value: SimpleJSONObject.Value, _ index: Int) -> Bool {
        guard first(index), case .null = value else { return false }
        return true
    }
}

extension TransactionPayload: FastDecodable {
    init?(simple object: SimpleJSONObject) {
        self.init()
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "transactionId": seen.assign(&self.transactionId, value.optionalString, 0)
            case "originalTransactionId": seen.assign(&self.originalTransactionId, value.optionalString, 1)
            case "webOrderLineItemId": seen.assign(&self.webOrderLineItemId, value.optionalString, 2)
            case "bundleId": seen.assign(&self.bundleId, value.optionalString, 3)
            case "productId": seen.assign(&self.productId, value.optionalString, 4)
            case "subscriptionGroupIdentifier": seen.assign(&self.subscriptionGroupIdentifier, value.optionalString, 5)
            case "purchaseDate": seen.assign(&self.purchaseDate, value.optionalInt64, 6)
            case "originalPurchaseDate": seen.assign(&self.originalPurchaseDate, value.optionalInt64, 7)
            case "expiresDate": seen.assign(&self.expiresDate, value.optionalInt64, 8)
            case "quantity": seen.assign(&self.quantity, value.optionalInt, 9)
            case "type": seen.assign(&type, value.optionalString.map { $0.map(ProductType.init(rawValue:)) }, 10)
            case "appAccountToken": seen.assign(&self.appAccountToken, value.optionalString, 11)
            case "inAppOwnershipType": seen.assign(&self.inAppOwnershipType, value.optionalString, 12)
            case "signedDate": seen.assign(&self.signedDate, value.optionalInt64, 13)
            case "revocationReason": seen.assign(&self.revocationReason, value.optionalInt, 14)
            case "revocationDate": seen.assign(&self.revocationDate, value.optionalInt64, 15)
            case "revocationType": seen.assign(&self.revocationType, value.optionalString, 16)
            case "revocationPercentage": seen.assign(&self.revocationPercentage, value.optionalInt, 17)
            case "isUpgraded": seen.assign(&self.isUpgraded, value.optionalBool, 18)
            case "offerType": seen.assign(&self.offerType, value.optionalInt, 19)
            case "offerIdentifier": seen.assign(&self.offerIdentifier, value.optionalString, 20)
            case "offerDiscountType": seen.assign(&self.offerDiscountType, value.optionalString, 21)
            case "offerPeriod": seen.assign(&self.offerPeriod, value.optionalString, 22)
            case "environment":
                seen.assign(&self.environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 23)
            case "storefront": seen.assign(&self.storefront, value.optionalString, 24)
            case "storefrontId": seen.assign(&self.storefrontId, value.optionalString, 25)
            case "transactionReason": seen.assign(&self.transactionReason, value.optionalString, 26)
            case "price": seen.assign(&self.price, value.optionalInt64, 27)
            case "currency": seen.assign(&self.currency, value.optionalString, 28)
            case "appTransactionId": seen.assign(&self.appTransactionId, value.optionalString, 29)
            case "previousOriginalTransactionId": seen.assign(&self.previousOriginalTransactionId, value.optionalString, 30)
            case "advancedCommerceInfo": seen.onlyNull(value, 31)
            case "billingPlanType": seen.assign(&self.billingPlanType, value.optionalString, 32)
            case "commitmentInfo": seen.onlyNull(value, 33)
            default: true
            }
        }
        guard accepted else { return nil }
    }
}

extension RenewalInfoPayload: FastDecodable {
    init?(simple object: SimpleJSONObject) {
        self.init()
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "originalTransactionId": seen.assign(&self.originalTransactionId, value.optionalString, 0)
            case "productId": seen.assign(&self.productId, value.optionalString, 1)
            case "autoRenewProductId": seen.assign(&self.autoRenewProductId, value.optionalString, 2)
            case "autoRenewStatus": seen.assign(&self.autoRenewStatus, value.optionalInt, 3)
            case "expirationIntent": seen.assign(&self.expirationIntent, value.optionalInt, 4)
            case "gracePeriodExpiresDate": seen.assign(&self.gracePeriodExpiresDate, value.optionalInt64, 5)
            case "isInBillingRetryPeriod": seen.assign(&self.isInBillingRetryPeriod, value.optionalBool, 6)
            case "priceIncreaseStatus": seen.assign(&self.priceIncreaseStatus, value.optionalInt, 7)
            case "recentSubscriptionStartDate": seen.assign(&self.recentSubscriptionStartDate, value.optionalInt64, 8)
            case "renewalDate": seen.assign(&self.renewalDate, value.optionalInt64, 9)
            case "renewalPrice": seen.assign(&self.renewalPrice, value.optionalInt64, 10)
            case "currency": seen.assign(&self.currency, value.optionalString, 11)
            case "offerType": seen.assign(&self.offerType, value.optionalInt, 12)
            case "offerIdentifier": seen.assign(&self.offerIdentifier, value.optionalString, 13)
            case "offerDiscountType": seen.assign(&self.offerDiscountType, value.optionalString, 14)
            case "offerPeriod": seen.assign(&self.offerPeriod, value.optionalString, 15)
            // An array: SimpleJSONObject never yields one, so only null reaches here.
            case "eligibleWinBackOfferIds": seen.onlyNull(value, 16)
            case "appAccountToken": seen.assign(&self.appAccountToken, value.optionalString, 17)
            case "appTransactionId": seen.assign(&self.appTransactionId, value.optionalString, 18)
            case "environment":
                seen.assign(&self.environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 19)
            case "signedDate": seen.assign(&self.signedDate, value.optionalInt64, 20)
            case "advancedCommerceInfo": seen.onlyNull(value, 21)
            case "commitmentInfo": seen.onlyNull(value, 22)
            case "renewalBillingPlanType": seen.assign(&self.renewalBillingPlanType, value.optionalString, 23)
            default: true
            }
        }
        guard accepted else { return nil }
    }
}

extension NotificationPayload: FastDecodable {
    init?(simple object: SimpleJSONObject) {
        self.init(notificationType: "", notificationUUID: "", version: nil)
        var type: String?? = nil
        var uuid: String?? = nil
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "notificationType": seen.assign(&type, value.optionalString.map { .some($0) }, 0)
            case "subtype": seen.assign(&self.subtype, value.optionalString.map { $0.map(NotificationSubtype.init(rawValue:)) }, 1)
            case "notificationUUID": seen.assign(&uuid, value.optionalString.map { .some($0) }, 2)
            case "version": seen.assign(&self.version, value.optionalString, 3)
            case "signedDate": seen.assign(&self.signedDate, value.optionalInt64, 4)
            case "data": seen.assign(&self.data, Self.nested(value, NotificationData.init(simple:)), 5)
            case "summary": seen.assign(&self.summary, Self.nested(value, RenewalExtensionSummary.init(simple:)), 6)
            case "externalPurchaseToken":
                seen.assign(&self.externalPurchaseToken, Self.nested(value, ExternalPurchaseToken.init(simple:)), 7)
            case "appData": seen.assign(&self.appData, Self.nested(value, AppData.init(simple:)), 8)
            default: true
            }
        }
        guard accepted else { return nil }
        // Both are required: absent or null, JSONDecoder throws.
        guard case .some(.some(let type)) = type, case .some(.some(let uuid)) = uuid else { return nil }
        notificationType = NotificationType(rawValue: type)
        notificationUUID = uuid
    }

    /// A nested object read on the fast path: .some(nil) for null, nil to decline.
    private static func nested<Nested>(_ value: SimpleJSONObject.Value, _ make: (SimpleJSONObject) -> Nested?) -> Nested?? {
        switch value {
        case .null: .some(nil)
        case .object(let object): make(object).map { .some($0) }
        default: nil
        }
    }
}

extension NotificationData {
    init?(simple object: SimpleJSONObject) {
        self.init()
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "appAppleId": seen.assign(&self.appAppleId, value.optionalInt64, 0)
            case "bundleId": seen.assign(&self.bundleId, value.optionalString, 1)
            case "bundleVersion": seen.assign(&self.bundleVersion, value.optionalString, 2)
            case "environment":
                seen.assign(&self.environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 3)
            case "signedTransactionInfo": seen.assign(&self.signedTransactionInfo, value.optionalString, 4)
            case "signedRenewalInfo": seen.assign(&self.signedRenewalInfo, value.optionalString, 5)
            case "status":
                seen.assign(&self.status, value.optionalInt.map { $0.map(SubscriptionStatus.init(rawValue:)) }, 6)
            case "consumptionRequestReason": seen.assign(&self.consumptionRequestReason, value.optionalString, 7)
            default: true
            }
        }
        guard accepted else { return nil }
    }
}

extension RenewalExtensionSummary {
    init?(simple object: SimpleJSONObject) {
        self.init()
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "environment":
                seen.assign(&self.environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 0)
            case "appAppleId": seen.assign(&self.appAppleId, value.optionalInt64, 1)
            case "bundleId": seen.assign(&self.bundleId, value.optionalString, 2)
            case "productId": seen.assign(&self.productId, value.optionalString, 3)
            case "requestIdentifier": seen.assign(&self.requestIdentifier, value.optionalString, 4)
            // An array: SimpleJSONObject never yields one, so only null reaches here.
            case "storefrontCountryCodes": seen.onlyNull(value, 5)
            case "succeededCount": seen.assign(&self.succeededCount, value.optionalInt64, 6)
            case "failedCount": seen.assign(&self.failedCount, value.optionalInt64, 7)
            default: true
            }
        }
        guard accepted else { return nil }
    }
}

extension ExternalPurchaseToken {
    init?(simple object: SimpleJSONObject) {
        self.init()
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "externalPurchaseId": seen.assign(&self.externalPurchaseId, value.optionalString, 0)
            case "tokenCreationDate": seen.assign(&self.tokenCreationDate, value.optionalInt64, 1)
            case "appAppleId": seen.assign(&self.appAppleId, value.optionalInt64, 2)
            case "bundleId": seen.assign(&self.bundleId, value.optionalString, 3)
            case "tokenType": seen.assign(&self.tokenType, value.optionalString, 4)
            case "tokenExpirationDate": seen.assign(&self.tokenExpirationDate, value.optionalInt64, 5)
            default: true
            }
        }
        guard accepted else { return nil }
    }
}

extension AppData {
    init?(simple object: SimpleJSONObject) {
        self.init()
        let accepted = object.readFields { key, value, seen in
            switch key {
            case "appAppleId": seen.assign(&self.appAppleId, value.optionalInt64, 0)
            case "bundleId": seen.assign(&self.bundleId, value.optionalString, 1)
            case "environment":
                seen.assign(&self.environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 2)
            case "signedAppTransactionInfo": seen.assign(&self.signedAppTransactionInfo, value.optionalString, 3)
            default: true
            }
        }
        guard accepted else { return nil }
    }
}
