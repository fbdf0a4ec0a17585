import Foundation
import Testing

@testable import Ledger

/// The hand-written row JSON must be the JSON `JSONEncoder` writes for the same rows.
@Suite("Batch rows as JSON")
struct RowJSONTests {
    static let awkward = ["plain", "quote \" backslash \\ slash / tab \t newline \n bell \u{7} nul \u{0}", "ünïcödé ✓ 😀", ""]

    static func parsed(_ text: String) throws -> NSObject {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSObject)
    }

    static func encoded(_ rows: some Encodable) throws -> NSObject {
        try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(rows)) as? NSObject)
    }

    static func subscription(_ index: Int, _ text: String, full: Bool) -> LedgerBatchRows.Subscription {
        LedgerBatchRows.Subscription(
            original_transaction_id: "customer-\(index)-\(text)", product_id: full ? text : nil, status: full ? index : nil,
            expires_ms: full ? -1_700_000_000_000 - Int64(index) : nil, auto_renew_status: full ? 0 : nil,
            auto_renew_product_id: full ? text : nil, is_in_billing_retry: full ? index % 2 == 0 : nil,
            grace_period_expires_ms: full ? Int64.max : nil, last_signed_ms: Int64.min + 1
        )
    }

    @Test func everyRowKindIsTheJSONTheEncoderWritesWithAndWithoutItsOptionalValues() throws {
        for (index, text) in Self.awkward.enumerated() {
            for full in [true, false] {
                let notifications = [
                    LedgerBatchRows.Notification(
                        notification_uuid: "uuid-\(text)", notification_type: text, subtype: full ? text : nil, signed_ms: Int64(index),
                        environment: text, original_transaction_id: full ? text : nil, transaction_id: full ? text : nil, source: text
                    )
                ]
                #expect(try Self.parsed(RowJSON.array(notifications)) == (try Self.encoded(notifications)))
                let transactions = [
                    LedgerBatchRows.Transaction(
                        transaction_id: text, original_transaction_id: text, product_id: full ? text : nil, product_type: full ? text : nil,
                        purchase_ms: full ? 1 : nil, expires_ms: full ? -2 : nil, revocation_ms: full ? 3 : nil,
                        revocation_reason: full ? index : nil, is_upgraded: full ? true : nil, signed_ms: 4, environment: full ? text : nil
                    )
                ]
                #expect(try Self.parsed(RowJSON.array(transactions)) == (try Self.encoded(transactions)))
                let subscriptions = [Self.subscription(index, text, full: full), Self.subscription(index + 1, text, full: !full)]
                #expect(try Self.parsed(RowJSON.array(subscriptions)) == (try Self.encoded(subscriptions)))
                let changes = [
                    LedgerBatchRows.SubscriptionChange(original_transaction_id: text, before: full ? subscriptions[1] : nil, after: subscriptions[0])
                ]
                #expect(try Self.parsed(RowJSON.array(changes)) == (try Self.encoded(changes)))
            }
        }
        #expect(try Self.parsed(RowJSON.array([LedgerBatchRows.Subscription]())) == (try Self.encoded([LedgerBatchRows.Subscription]())))
    }
}
