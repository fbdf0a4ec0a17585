import Foundation
import LedgerModel
import Testing

/// A row of the change feed (`app_store.changes`' before and after) read back as its record.
@Suite("Feed rows: the change feed's JSON as ledger records")
struct FeedRowTests {
    @Test func aFeedRowReadsBackAsItsRecordTimesFromMillisecondsAndAbsentColumnsLeftBlank() throws {
        let text = """
            {"transaction_id": "2000", "original_transaction_id": "1000", "product_id": "monthly", "product_type": "Auto-Renewable Subscription",
             "purchase_ms": 1800000000123, "expires_ms": 1802592000123, "signed_ms": 1800000000500, "is_upgraded": false, "price": 4990,
             "offer_type": 1, "environment": "Production", "bundle_id": "com.example.app", "app_account_token": "7e3fb20b-4cdb-47cc-936d-99d65f608138"}
            """
        let record = try TransactionRecord(feedRow: text)
        #expect(record.transactionId == "2000" && record.originalTransactionId == "1000" && record.productId == "monthly")
        #expect(record.purchaseDate == Date(timeIntervalSince1970: 1_800_000_000.123) && record.signedDate == Date(timeIntervalSince1970: 1_800_000_000.5))
        #expect(record.isUpgraded == false && record.price == 4990 && record.offerType == 1 && record.revocationDate == nil && record.currency == nil)
        #expect(record.appAccountToken == UUID(uuidString: "7e3fb20b-4cdb-47cc-936d-99d65f608138"))
        let subscription = try SubscriptionRecord(feedRow: #"{"original_transaction_id": "1000", "status": 4, "grace_period_expires_ms": 1800000000000, "last_signed_ms": 1800000000000, "eligible_win_back_offer_ids": ["a", "b"]}"#)
        #expect(subscription.status == 4 && subscription.gracePeriodExpiresDate == Date(timeIntervalSince1970: 1_800_000_000) && subscription.eligibleWinBackOfferIds == ["a", "b"])
        #expect(throws: LedgerColumnMismatch.self) { try SubscriptionRecord(feedRow: #"{"original_transaction_id": "1000", "status": "active"}"#) }
        #expect(throws: LedgerColumnMismatch.self) { try SubscriptionRecord(feedRow: #"["not", "an", "object"]"#) }
    }
}
