/// The times a signed payload's dates may hold (issue 67): from the Unix epoch to the end of year
/// 9999, in milliseconds. A date outside (negative, or 10^18 ms, which PostgreSQL's timestamptz
/// cannot hold and which overflows a count of microseconds) is malformed: refused with its field
/// named, never a crash, a wrapped date or a database error in the ledger. Apple's are all after
/// 2008.
public enum PayloadDates {
    /// 1970-01-01T00:00:00.000Z.
    public static let earliest: UnixMilliseconds = 0
    /// 9999-12-31T23:59:59.999Z.
    public static let latest: UnixMilliseconds = 253_402_300_799_999

    /// The rejection for the first of `dates` out of range, if any.
    static func rejection(_ dates: KeyValuePairs<String, UnixMilliseconds?>) -> Rejection? {
        for (field, value) in dates {
            guard let value, !(earliest...latest).contains(value) else { continue }
            return Rejection(.malformed, "\(field) is \(value) ms, outside 1970-01-01 to 9999-12-31")
        }
        return nil
    }
}

/// A payload whose dates the verifier checks against `PayloadDates` before it is trusted.
protocol DatedPayload {
    /// Every date field, by its name in Apple's JSON.
    var dates: KeyValuePairs<String, UnixMilliseconds?> { get }
}

extension DatedPayload {
    var dateOutOfRange: Rejection? { PayloadDates.rejection(dates) }
}

extension NotificationPayload: DatedPayload {
    var dates: KeyValuePairs<String, UnixMilliseconds?> {
        [
            "signedDate": signedDate,
            "externalPurchaseToken.tokenCreationDate": externalPurchaseToken?.tokenCreationDate,
            "externalPurchaseToken.tokenExpirationDate": externalPurchaseToken?.tokenExpirationDate,
        ]
    }
}

extension TransactionPayload: DatedPayload {
    var dates: KeyValuePairs<String, UnixMilliseconds?> {
        [
            "signedDate": signedDate, "purchaseDate": purchaseDate, "originalPurchaseDate": originalPurchaseDate,
            "expiresDate": expiresDate, "revocationDate": revocationDate,
        ]
    }
}

extension RenewalInfoPayload: DatedPayload {
    var dates: KeyValuePairs<String, UnixMilliseconds?> {
        [
            "signedDate": signedDate, "renewalDate": renewalDate, "gracePeriodExpiresDate": gracePeriodExpiresDate,
            "recentSubscriptionStartDate": recentSubscriptionStartDate,
        ]
    }
}

extension AppTransactionPayload: DatedPayload {
    var dates: KeyValuePairs<String, UnixMilliseconds?> {
        [
            "signedDate": signedDate, "receiptCreationDate": receiptCreationDate, "originalPurchaseDate": originalPurchaseDate,
            "preorderDate": preorderDate,
        ]
    }
}
