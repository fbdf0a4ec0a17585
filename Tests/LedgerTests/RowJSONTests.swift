@testable import Decisions
import Foundation
import Testing

@testable import Ledger

/// The hand-written row JSON, parsed back by `JSONSerialization`, must hold every column's value
/// under its key (times as UNIX milliseconds), leave absent values out, and escape any text.
@Suite("Batch rows as JSON")
struct RowJSONTests {
    static let awkward = ["plain", "quote \" backslash \\ slash / tab \t newline \n bell \u{7} nul \u{0}", "ünïcödé ✓ 😀", ""]

    static func parsed(_ text: String) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
    }

    /// What `JSONSerialization` reads for the column's value (nil: the key must be absent).
    static func expected(_ value: LedgerValue?) -> NSObject? {
        switch value {
        case nil: nil
        case .text(let text)?: text as NSString
        case .integer(let number)?: NSNumber(value: number)
        case .boolean(let flag)?: NSNumber(value: flag)
        case .time(let date)?: NSNumber(value: date.unixMilliseconds)
        case .uuid(let uuid)?: uuid.uuidString as NSString
        case .texts(let texts)?: texts as NSArray
        }
    }

    static func check<Record: LedgerRow>(_ records: [Record]) throws {
        let objects = try parsed(RowJSON.array(records))
        #expect(objects.count == records.count)
        for (object, record) in zip(objects, records) {
            var keys: Set<String> = []
            for column in Record.columns {
                let want = expected(column.get(record))
                if want != nil { keys.insert(column.jsonKey) }
                #expect((object[column.jsonKey] as? NSObject) == want, "\(column.name)")
            }
            #expect(Set(object.keys) == keys)
        }
    }

    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    static func subscription(_ index: Int, _ text: String, full: Bool) -> SubscriptionRecord {
        var record = SubscriptionRecord(
            originalTransactionId: "customer-\(index)-\(text)", productId: full ? text : nil, status: full ? index : nil,
            expiresDate: full ? date(-1_700_000_000_000 - Int64(index)) : nil, autoRenewStatus: full ? 0 : nil,
            autoRenewProductId: full ? text : nil, isInBillingRetry: full ? index % 2 == 0 : nil,
            gracePeriodExpiresDate: full ? date(253_402_300_799_999) : nil, lastSignedDate: date(1_700_000_000_123),
            environment: full ? text : nil
        )
        // A list of texts, awkward ones included, and an empty one.
        record.eligibleWinBackOfferIds = full ? (index % 2 == 0 ? [text, "second", text] : []) : nil
        record.renewalDate = full ? date(1_700_000_000_456) : nil
        return record
    }

    @Test func theChangeContextParsesBackToItsCauseRunAndNotificationsWithAnyKeyEscaped() throws {
        let run = UUID()
        let subscriptions = Dictionary(uniqueKeysWithValues: Self.awkward.map { ($0, UUID()) })
        let transactions = ["2000000000000001": UUID(), "2000000000000002": UUID()]
        for runId in [run, nil] {
            let text = RowJSON.changeContext(cause: "webhook", runId: runId, subscriptions: subscriptions, transactions: transactions)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            #expect(object["cause"] as? String == "webhook")
            if let runId { #expect(object["run"] as? String == runId.uuidString.lowercased()) } else { #expect(object["run"] is NSNull) }
            let notifications = try #require(object["notifications"] as? [String: [String: String]])
            #expect(notifications["subscription"] == subscriptions.mapValues { $0.uuidString.lowercased() })
            #expect(notifications["transaction"] == transactions.mapValues { $0.uuidString.lowercased() })
        }
        let empty = RowJSON.changeContext(cause: "repair", runId: nil, subscriptions: [:], transactions: [:])
        #expect(empty == #"{"cause":"repair","run":null,"notifications":{"subscription":{},"transaction":{}}}"#)
    }

    @Test func everyTableWritesEachColumnUnderItsKeyAndLeavesAbsentValuesOut() throws {
        for (index, text) in Self.awkward.enumerated() {
            for full in [true, false] {
                try Self.check([
                    NotificationRecord(
                        notificationUUID: UUID(), notificationType: text, subtype: full ? text : nil, signedDate: Self.date(Int64(index)),
                        environment: text, bundleId: text, originalTransactionId: full ? text : nil, transactionId: full ? text : nil,
                        signedPayload: "not in the JSON", source: full ? .history : .webhook
                    )
                ])
                try Self.check([
                    TransactionRecord(
                        transactionId: text, originalTransactionId: text, productId: full ? text : nil, productType: full ? text : nil,
                        purchaseDate: full ? Self.date(1) : nil, expiresDate: full ? Self.date(-2) : nil,
                        revocationDate: full ? Self.date(3) : nil, revocationReason: full ? index : nil, isUpgraded: full ? true : nil,
                        signedDate: Self.date(4), environment: full ? text : nil, bundleId: full ? text : nil, signedTransaction: "not in the JSON"
                    )
                ])
                try Self.check([Self.subscription(index, text, full: full), Self.subscription(index + 1, text, full: !full)])
            }
        }
        try Self.check([SubscriptionRecord]())
    }

    @Test func aChangeHoldsBeforeAndAfterAndLeavesBeforeOutWhenThereWasNoRow() throws {
        let after = Self.subscription(1, "after \"quoted\"", full: true)
        let before = Self.subscription(1, "before", full: false)
        let objects = try Self.parsed(
            RowJSON.array([LedgerBatchRows.SubscriptionChange(before: before, after: after), .init(before: nil, after: after)])
        )
        #expect(objects.count == 2)
        #expect(objects[0]["original_transaction_id"] as? String == after.originalTransactionId)
        #expect((objects[0]["before"] as? [String: Any])?["original_transaction_id"] as? String == before.originalTransactionId)
        #expect((objects[0]["after"] as? [String: Any])?["product_id"] as? String == after.productId)
        #expect(objects[1]["before"] == nil)
        #expect(Set(objects[1].keys) == ["original_transaction_id", "after"])
    }

    /// A verified payload's number beyond its column's range is written as absent (NULL), not
    /// as a value that fails the batch's cast on every rerun.
    @Test func aNumberBeyondItsColumnsRangeIsLeftOutAndOneThatFitsIsKept() throws {
        var record = TransactionRecord.blank
        record.transactionId = "1"
        record.quantity = Int(Int32.max) + 1
        record.offerType = Int(Int16.max) + 1
        record.revocationPercentage = 100_000
        record.price = Int64.max
        let object = try #require(try Self.parsed(RowJSON.array([record])).first)
        #expect(object["quantity"] == nil)
        #expect(object["offer_type"] == nil)
        #expect(object["revocation_percentage"] as? Int == 100_000)
        #expect(object["price"] as? Int64 == Int64.max)
    }

    /// `app_store.run_subscription_changes` holds before/after records written by earlier
    /// versions: the JSON keys are a stored format, and must not drift with the columns' names.
    @Test func subscriptionJSONKeysAreTheStoredFormatOfEarlierVersions() {
        #expect(
            SubscriptionRecord.columns.prefix(10).map(\.jsonKey) == [
                "original_transaction_id", "product_id", "status", "expires_ms", "auto_renew_status", "auto_renew_product_id",
                "is_in_billing_retry", "grace_period_expires_ms", "last_signed_ms", "environment",
            ]
        )
    }

    /// The repair's field names in reports (`RepairPlanner.differences`) were written by hand
    /// before the columns listed them; they must stay the same. Every column from Apple's payloads
    /// is compared (issue 30): the state columns first, then the facts, neither the key nor the
    /// signing time.
    @Test func comparedSubscriptionFieldsKeepTheirReportNames() {
        #expect(
            SubscriptionRecord.columns.filter(\.compared).map(\.fieldName) == [
                "productId", "status", "expiresDate", "autoRenewStatus", "autoRenewProductId", "isInBillingRetry", "gracePeriodExpiresDate",
                "environment", "appAccountToken", "subscriptionGroupIdentifier", "inAppOwnershipType", "expirationIntent", "priceIncreaseStatus",
                "renewalPrice", "currency", "offerType", "offerIdentifier",
                // Migration 0023's.
                "renewalDate", "offerDiscountType", "offerPeriod", "appTransactionId", "eligibleWinBackOfferIds",
            ]
        )
        #expect(TransactionRecord.columns.filter { !$0.compared }.map(\.name) == ["transaction_id", "signed_date", "bundle_id"])
    }
}
