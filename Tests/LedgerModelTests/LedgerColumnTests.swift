import Foundation
import LedgerModel
import Testing

/// The ledger's columns as values: what the SQL, the batch JSON and a repair's comparison are
/// made from, without a database.
@Suite struct LedgerColumnTests {
    static let signed = Date(timeIntervalSince1970: 1_790_000_000)

    static func subscription(expires: Date?, signed: Date = signed) -> SubscriptionRecord {
        SubscriptionRecord(
            originalTransactionId: "2000000000000001", productId: "com.example.monthly", status: 1, expiresDate: expires, autoRenewStatus: 1,
            autoRenewProductId: "com.example.monthly", isInBillingRetry: false, gracePeriodExpiresDate: nil, lastSignedDate: signed,
            environment: "Sandbox", bundleId: "com.example.app"
        )
    }

    @Test func timesAreComparedAtApplesMillisecondPrecision() {
        #expect(LedgerValue.time(Self.signed) == .time(Self.signed.addingTimeInterval(0.000_4)))
        #expect(LedgerValue.time(Self.signed) != .time(Self.signed.addingTimeInterval(0.001)))
        #expect(Set([LedgerValue.time(Self.signed), .time(Self.signed.addingTimeInterval(0.000_4))]).count == 1, "hashed as compared")
    }

    @Test func aTimeColumnTravelsInTheJSONAsMillisecondsUnderItsOwnKey() throws {
        let expires = try #require(SubscriptionRecord.columns.first { $0.name == "expires_date" })
        #expect(expires.jsonKey == "expires_ms")
        #expect(expires.jsonSQLType == "bigint")
        #expect(expires.fieldName == "expiresDate")
        #expect(expires.value(from: "r") == "timestamptz 'epoch' + r.expires_ms * interval '1 millisecond'")
    }

    @Test func aNewerSignatureAloneIsNoChangeButANewExpiryIs() {
        let before = Self.subscription(expires: Self.signed.addingTimeInterval(86_400))
        let resigned = Self.subscription(expires: Self.signed.addingTimeInterval(86_400), signed: Self.signed.addingTimeInterval(60))
        #expect(SubscriptionRecord.sameContent(before, resigned))
        #expect(SubscriptionRecord.differences(before, resigned).isEmpty)
        let renewed = Self.subscription(expires: Self.signed.addingTimeInterval(2 * 86_400), signed: Self.signed.addingTimeInterval(60))
        #expect(!SubscriptionRecord.sameContent(before, renewed))
        #expect(SubscriptionRecord.differences(before, renewed).map(\.field) == ["expiresDate"])
    }

    @Test func anUpsertNeverRewritesItsKeyAndKeepsWhatTheNewRowLacksWhereTheColumnSaysSo() {
        let set = SubscriptionRecord.updateList(table: "t")
        let assigned = set.components(separatedBy: ",\n").map { $0.trimmingCharacters(in: .whitespaces).components(separatedBy: " = ")[0] }
        for key in SubscriptionRecord.columns where key.update == .key { #expect(!assigned.contains(key.name), "\(key.name) is rewritten") }
        for kept in SubscriptionRecord.columns where kept.update == .keepWhenAbsent {
            #expect(set.contains("\(kept.name) = coalesce(EXCLUDED.\(kept.name), t.\(kept.name))"))
        }
        #expect(SubscriptionRecord.columns.contains { $0.update == .key })
    }
}
