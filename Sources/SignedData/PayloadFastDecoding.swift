/// The payloads a verified JWS is decoded into, with a fast path for their plain shape
/// (`SimpleJSONObject`). Each fast initializer sets the fields exactly as the synthesized
/// `Decodable` conformance would and returns nil (so that `JSONDecoder` decides) for anything
/// else: a value of another type, a key given twice, a missing required field, or a field whose
/// value the fast path does not read (`advancedCommerceInfo` and `commitmentInfo` other than
/// null). Keys it does not know are ignored, as `JSONDecoder` ignores them.
/// `PayloadFastDecodingTests` checks every field of every type against `JSONDecoder`.
protocol FastDecodable: Decodable {
    init?(simple object: SimpleJSONObject)
}

extension FastDecodable {
    /// The payload read on the fast path, or nil when `JSONDecoder` must decide.
    static func decodeFast(_ bytes: [UInt8]) -> Self? {
        SimpleJSONObject.parse(bytes).flatMap(Self.init(simple:))
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
        var seen = SeenFields()
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "transactionId": accepted = seen.assign(&transactionId, value.optionalString, 0)
            case "originalTransactionId": accepted = seen.assign(&originalTransactionId, value.optionalString, 1)
            case "webOrderLineItemId": accepted = seen.assign(&webOrderLineItemId, value.optionalString, 2)
            case "bundleId": accepted = seen.assign(&bundleId, value.optionalString, 3)
            case "productId": accepted = seen.assign(&productId, value.optionalString, 4)
            case "subscriptionGroupIdentifier": accepted = seen.assign(&subscriptionGroupIdentifier, value.optionalString, 5)
            case "purchaseDate": accepted = seen.assign(&purchaseDate, value.optionalInt64, 6)
            case "originalPurchaseDate": accepted = seen.assign(&originalPurchaseDate, value.optionalInt64, 7)
            case "expiresDate": accepted = seen.assign(&expiresDate, value.optionalInt64, 8)
            case "quantity": accepted = seen.assign(&quantity, value.optionalInt, 9)
            case "type": accepted = seen.assign(&type, value.optionalString.map { $0.map(ProductType.init(rawValue:)) }, 10)
            case "appAccountToken": accepted = seen.assign(&appAccountToken, value.optionalString, 11)
            case "inAppOwnershipType": accepted = seen.assign(&inAppOwnershipType, value.optionalString, 12)
            case "signedDate": accepted = seen.assign(&signedDate, value.optionalInt64, 13)
            case "revocationReason": accepted = seen.assign(&revocationReason, value.optionalInt, 14)
            case "revocationDate": accepted = seen.assign(&revocationDate, value.optionalInt64, 15)
            case "revocationType": accepted = seen.assign(&revocationType, value.optionalString, 16)
            case "revocationPercentage": accepted = seen.assign(&revocationPercentage, value.optionalInt, 17)
            case "isUpgraded": accepted = seen.assign(&isUpgraded, value.optionalBool, 18)
            case "offerType": accepted = seen.assign(&offerType, value.optionalInt, 19)
            case "offerIdentifier": accepted = seen.assign(&offerIdentifier, value.optionalString, 20)
            case "offerDiscountType": accepted = seen.assign(&offerDiscountType, value.optionalString, 21)
            case "offerPeriod": accepted = seen.assign(&offerPeriod, value.optionalString, 22)
            case "environment":
                accepted = seen.assign(&environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 23)
            case "storefront": accepted = seen.assign(&storefront, value.optionalString, 24)
            case "storefrontId": accepted = seen.assign(&storefrontId, value.optionalString, 25)
            case "transactionReason": accepted = seen.assign(&transactionReason, value.optionalString, 26)
            case "price": accepted = seen.assign(&price, value.optionalInt64, 27)
            case "currency": accepted = seen.assign(&currency, value.optionalString, 28)
            case "appTransactionId": accepted = seen.assign(&appTransactionId, value.optionalString, 29)
            case "previousOriginalTransactionId": accepted = seen.assign(&previousOriginalTransactionId, value.optionalString, 30)
            case "advancedCommerceInfo": accepted = seen.onlyNull(value, 31)
            case "billingPlanType": accepted = seen.assign(&billingPlanType, value.optionalString, 32)
            case "commitmentInfo": accepted = seen.onlyNull(value, 33)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
    }
}

extension RenewalInfoPayload: FastDecodable {
    init?(simple object: SimpleJSONObject) {
        self.init()
        var seen = SeenFields()
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "originalTransactionId": accepted = seen.assign(&originalTransactionId, value.optionalString, 0)
            case "productId": accepted = seen.assign(&productId, value.optionalString, 1)
            case "autoRenewProductId": accepted = seen.assign(&autoRenewProductId, value.optionalString, 2)
            case "autoRenewStatus": accepted = seen.assign(&autoRenewStatus, value.optionalInt, 3)
            case "expirationIntent": accepted = seen.assign(&expirationIntent, value.optionalInt, 4)
            case "gracePeriodExpiresDate": accepted = seen.assign(&gracePeriodExpiresDate, value.optionalInt64, 5)
            case "isInBillingRetryPeriod": accepted = seen.assign(&isInBillingRetryPeriod, value.optionalBool, 6)
            case "priceIncreaseStatus": accepted = seen.assign(&priceIncreaseStatus, value.optionalInt, 7)
            case "recentSubscriptionStartDate": accepted = seen.assign(&recentSubscriptionStartDate, value.optionalInt64, 8)
            case "renewalDate": accepted = seen.assign(&renewalDate, value.optionalInt64, 9)
            case "renewalPrice": accepted = seen.assign(&renewalPrice, value.optionalInt64, 10)
            case "currency": accepted = seen.assign(&currency, value.optionalString, 11)
            case "offerType": accepted = seen.assign(&offerType, value.optionalInt, 12)
            case "offerIdentifier": accepted = seen.assign(&offerIdentifier, value.optionalString, 13)
            case "offerDiscountType": accepted = seen.assign(&offerDiscountType, value.optionalString, 14)
            case "offerPeriod": accepted = seen.assign(&offerPeriod, value.optionalString, 15)
            // An array: SimpleJSONObject never yields one, so only null reaches here.
            case "eligibleWinBackOfferIds": accepted = seen.onlyNull(value, 16)
            case "appAccountToken": accepted = seen.assign(&appAccountToken, value.optionalString, 17)
            case "appTransactionId": accepted = seen.assign(&appTransactionId, value.optionalString, 18)
            case "environment":
                accepted = seen.assign(&environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 19)
            case "signedDate": accepted = seen.assign(&signedDate, value.optionalInt64, 20)
            case "advancedCommerceInfo": accepted = seen.onlyNull(value, 21)
            case "commitmentInfo": accepted = seen.onlyNull(value, 22)
            case "renewalBillingPlanType": accepted = seen.assign(&renewalBillingPlanType, value.optionalString, 23)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
    }
}

extension NotificationPayload: FastDecodable {
    init?(simple object: SimpleJSONObject) {
        self.init(notificationType: "", notificationUUID: "", version: nil)
        var seen = SeenFields()
        var type: String?? = nil
        var uuid: String?? = nil
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "notificationType": accepted = seen.assign(&type, value.optionalString.map { .some($0) }, 0)
            case "subtype": accepted = seen.assign(&subtype, value.optionalString.map { $0.map(NotificationSubtype.init(rawValue:)) }, 1)
            case "notificationUUID": accepted = seen.assign(&uuid, value.optionalString.map { .some($0) }, 2)
            case "version": accepted = seen.assign(&version, value.optionalString, 3)
            case "signedDate": accepted = seen.assign(&signedDate, value.optionalInt64, 4)
            case "data": accepted = seen.assign(&data, Self.nested(value, NotificationData.init(simple:)), 5)
            case "summary": accepted = seen.assign(&summary, Self.nested(value, RenewalExtensionSummary.init(simple:)), 6)
            case "externalPurchaseToken":
                accepted = seen.assign(&externalPurchaseToken, Self.nested(value, ExternalPurchaseToken.init(simple:)), 7)
            case "appData": accepted = seen.assign(&appData, Self.nested(value, AppData.init(simple:)), 8)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
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
        var seen = SeenFields()
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "appAppleId": accepted = seen.assign(&appAppleId, value.optionalInt64, 0)
            case "bundleId": accepted = seen.assign(&bundleId, value.optionalString, 1)
            case "bundleVersion": accepted = seen.assign(&bundleVersion, value.optionalString, 2)
            case "environment":
                accepted = seen.assign(&environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 3)
            case "signedTransactionInfo": accepted = seen.assign(&signedTransactionInfo, value.optionalString, 4)
            case "signedRenewalInfo": accepted = seen.assign(&signedRenewalInfo, value.optionalString, 5)
            case "status":
                accepted = seen.assign(&status, value.optionalInt.map { $0.map(SubscriptionStatus.init(rawValue:)) }, 6)
            case "consumptionRequestReason": accepted = seen.assign(&consumptionRequestReason, value.optionalString, 7)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
    }
}

extension RenewalExtensionSummary {
    init?(simple object: SimpleJSONObject) {
        self.init()
        var seen = SeenFields()
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "environment":
                accepted = seen.assign(&environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 0)
            case "appAppleId": accepted = seen.assign(&appAppleId, value.optionalInt64, 1)
            case "bundleId": accepted = seen.assign(&bundleId, value.optionalString, 2)
            case "productId": accepted = seen.assign(&productId, value.optionalString, 3)
            case "requestIdentifier": accepted = seen.assign(&requestIdentifier, value.optionalString, 4)
            // An array: SimpleJSONObject never yields one, so only null reaches here.
            case "storefrontCountryCodes": accepted = seen.onlyNull(value, 5)
            case "succeededCount": accepted = seen.assign(&succeededCount, value.optionalInt64, 6)
            case "failedCount": accepted = seen.assign(&failedCount, value.optionalInt64, 7)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
    }
}

extension ExternalPurchaseToken {
    init?(simple object: SimpleJSONObject) {
        self.init()
        var seen = SeenFields()
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "externalPurchaseId": accepted = seen.assign(&externalPurchaseId, value.optionalString, 0)
            case "tokenCreationDate": accepted = seen.assign(&tokenCreationDate, value.optionalInt64, 1)
            case "appAppleId": accepted = seen.assign(&appAppleId, value.optionalInt64, 2)
            case "bundleId": accepted = seen.assign(&bundleId, value.optionalString, 3)
            case "tokenType": accepted = seen.assign(&tokenType, value.optionalString, 4)
            case "tokenExpirationDate": accepted = seen.assign(&tokenExpirationDate, value.optionalInt64, 5)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
    }
}

extension AppData {
    init?(simple object: SimpleJSONObject) {
        self.init()
        var seen = SeenFields()
        for (key, value) in object.fields {
            let accepted: Bool
            switch key {
            case "appAppleId": accepted = seen.assign(&appAppleId, value.optionalInt64, 0)
            case "bundleId": accepted = seen.assign(&bundleId, value.optionalString, 1)
            case "environment":
                accepted = seen.assign(&environment, value.optionalString.map { $0.map(AppStoreEnvironment.init(rawValue:)) }, 2)
            case "signedAppTransactionInfo": accepted = seen.assign(&signedAppTransactionInfo, value.optionalString, 3)
            default: accepted = true
            }
            guard accepted else { return nil }
        }
    }
}
