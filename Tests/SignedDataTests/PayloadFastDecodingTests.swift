import Foundation
import Testing

@testable import SignedData

/// The fast path that reads payloads (`SimpleJSONObject`, `PayloadFastDecoding`) must give what
/// `JSONDecoder` gives, or decline. These compare the two on every field of every payload type,
/// on Apple's own payload, and on the shapes the fast path must leave to `JSONDecoder`.
@Suite("Payload decoding: the fast path equals JSONDecoder or declines")
struct PayloadFastDecodingTests {
    /// A JSON object with every field of `value`'s type set to a distinct value of its type,
    /// found by reflection, so that a field the fast path forgets shows up as a difference.
    /// Fields the fast path reads only as null (loosely documented objects, arrays) are left out.
    static func everyField(of value: Any, seed: Int = 0) -> [String: Any] {
        var object: [String: Any] = [:]
        for (index, child) in Mirror(reflecting: value).children.enumerated() {
            guard let label = child.label else { continue }
            let number = seed * 100 + index + 1
            switch type(of: child.value) {
            case is String.Type, is String?.Type: object[label] = "\(label)-\(number)"
            case is Int64?.Type: object[label] = 1_700_000_000_000 + number
            case is Int?.Type: object[label] = number
            case is Bool?.Type: object[label] = number % 2 == 0
            case is AppStoreEnvironment?.Type, is ProductType?.Type, is NotificationSubtype?.Type, is NotificationType.Type:
                object[label] = "KIND_\(number)"
            case is SubscriptionStatus?.Type: object[label] = number % 5 + 1
            case is NotificationData?.Type: object[label] = everyField(of: NotificationData(), seed: seed + 1)
            case is RenewalExtensionSummary?.Type: object[label] = everyField(of: RenewalExtensionSummary(), seed: seed + 2)
            case is ExternalPurchaseToken?.Type: object[label] = everyField(of: ExternalPurchaseToken(), seed: seed + 3)
            case is AppData?.Type: object[label] = everyField(of: AppData(), seed: seed + 4)
            case is JSONValue?.Type, is [String]?.Type: continue
            default: Issue.record("no test value for \(label): \(type(of: child.value))")
            }
        }
        return object
    }

    static func bytes(_ object: [String: Any]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    /// Both ways; the fast one must not decline here.
    static func bothWays<Payload: FastDecodable & Equatable>(_ type: Payload.Type, _ bytes: [UInt8]) throws -> (fast: Payload?, decoder: Payload) {
        (Payload.decodeFast(bytes), try JSONDecoder().decode(Payload.self, from: Data(bytes)))
    }

    @Test func everyFieldOfATransactionReadsAsJSONDecoderReadsIt() throws {
        let (fast, decoder) = try Self.bothWays(TransactionPayload.self, try Self.bytes(Self.everyField(of: TransactionPayload())))
        #expect(fast == decoder)
        #expect(decoder.transactionId != nil && decoder.billingPlanType != nil && decoder.isUpgraded != nil)
    }

    @Test func everyFieldOfARenewalInfoReadsAsJSONDecoderReadsIt() throws {
        let (fast, decoder) = try Self.bothWays(RenewalInfoPayload.self, try Self.bytes(Self.everyField(of: RenewalInfoPayload())))
        #expect(fast == decoder)
        #expect(decoder.renewalBillingPlanType != nil && decoder.isInBillingRetryPeriod != nil)
    }

    @Test func everyFieldOfANotificationAndOfEachNestedObjectReadsAsJSONDecoderReadsIt() throws {
        let sample = NotificationPayload(notificationType: .didRenew, notificationUUID: "u")
        var object = Self.everyField(of: sample)
        // summary carries an array (storefrontCountryCodes), left out above; the rest is plain.
        let (fast, decoder) = try Self.bothWays(NotificationPayload.self, try Self.bytes(object))
        #expect(fast == decoder)
        #expect(decoder.data?.signedTransactionInfo != nil && decoder.summary?.failedCount != nil)
        #expect(decoder.externalPurchaseToken?.tokenExpirationDate != nil && decoder.appData?.signedAppTransactionInfo != nil)
        #expect(decoder.data?.status != nil && decoder.subtype != nil && decoder.version != nil)
        // Nulls for every optional field read as absent, both ways.
        for key in object.keys where key != "notificationType" && key != "notificationUUID" { object[key] = NSNull() }
        let nulls = try Self.bothWays(NotificationPayload.self, try Self.bytes(object))
        #expect(nulls.fast == nulls.decoder)
    }

    @Test func applesOwnSignedTransactionReadsAsJSONDecoderReadsIt() throws {
        let jws = try String(contentsOf: RealApplePayloadTests.directory.appendingPathComponent("sandbox-consumable-transaction.jws"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let payload = try #require(Base64URL.decode(Substring(jws.split(separator: ".")[1])))
        let (fast, decoder) = try Self.bothWays(TransactionPayload.self, payload)
        #expect(fast == decoder)
        #expect(fast != nil, "Apple's plain payload should take the fast path")
    }

    /// Plain JSON in forms an encoder may choose: the fast path reads it, and as JSONDecoder does.
    @Test(arguments: [
        #"  { "transactionId" : "1" ,"price":-0 , "quantity": 12 }  "#,
        "{\n\t\"transactionId\":\"1\",\r\n\"isUpgraded\":false}",
        #"{"unknownString":"x","unknownNumber":5,"unknownObject":{"a":1,"b":null},"unknownBool":true,"unknownNull":null,"transactionId":"1"}"#,
        #"{"price":-9223372036854775807,"expiresDate":9223372036854775807}"#,
        #"{}"#,
        #"{"advancedCommerceInfo":null,"commitmentInfo":null,"transactionId":""}"#,
    ])
    func plainVariantsReadAsJSONDecoderReadsThem(text: String) throws {
        let (fast, decoder) = try Self.bothWays(TransactionPayload.self, Array(text.utf8))
        #expect(fast != nil)
        #expect(fast == decoder)
    }

    /// What the fast path must leave to JSONDecoder: escapes, non-ASCII, arrays, fractions and
    /// exponents, numbers that overflow, repeated keys, wrong types, deeper objects, fields it
    /// reads only as null, malformed JSON and trailing text.
    @Test(arguments: [
        #"{"transactionId":"a\/b"}"#,
        #"{"transactionId":"\u0041"}"#,
        #"{"storefront":"Zürich"}"#,
        #"{"transactionId":"1","unknown":[1,2]}"#,
        #"{"price":1.5}"#,
        #"{"price":1e3}"#,
        #"{"price":99999999999999999999}"#,
        #"{"price":-9223372036854775808}"#,
        #"{"price":01}"#,
        #"{"transactionId":"1","transactionId":"2"}"#,
        #"{"purchaseDate":"soon"}"#,
        #"{"isUpgraded":1}"#,
        #"{"quantity":true}"#,
        #"{"unknown":{"deeper":{"a":1}}}"#,
        #"{"advancedCommerceInfo":{"a":1}}"#,
        #"{"transactionId":"1",}"#,
        #"{"transactionId":"1"} x"#,
        #"{"transactionId":"1""#,
        #"{"transactionId":tru}"#,
        #"["transactionId"]"#,
    ])
    func shapesBeyondThePlainOneAreLeftToJSONDecoder(text: String) {
        #expect(TransactionPayload.decodeFast(Array(text.utf8)) == nil)
    }

    @Test func aNotificationWithoutItsTypeOrUUIDIsLeftToJSONDecoder() {
        for text in [#"{"notificationUUID":"u"}"#, #"{"notificationType":"DID_RENEW"}"#, #"{"notificationType":null,"notificationUUID":"u"}"#] {
            #expect(NotificationPayload.decodeFast(Array(text.utf8)) == nil)
            #expect(throws: (any Error).self) { try JSONDecoder().decode(NotificationPayload.self, from: Data(text.utf8)) }
        }
    }

    /// The eight-bytes-at-a-time scan finds every byte a JSON string needs care with at every
    /// offset of a word, and passes over every byte that needs none.
    @Test func theWordScanFindsEverySpecialByteAtEveryOffsetAndNothingElse() {
        let alwaysSpecial: [UInt8] = [0x22, 0x5C, 0x00, 0x01, 0x0A, 0x1F]
        let plain: [UInt8] = [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F, UInt8(ascii: "A"), UInt8(ascii: "-")]
        let nonASCII: [UInt8] = [0x80, 0xC3, 0xFF]
        for length in [1, 7, 8, 9, 16, 23, 40] {
            for position in 0..<length {
                for filler in plain + nonASCII {
                    for special in alwaysSpecial + nonASCII where special != filler {
                        var bytes = [UInt8](repeating: filler, count: length)
                        bytes[position] = special
                        let fillerSpecial = nonASCII.contains(filler)
                        let strict = bytes.withUnsafeBufferPointer { JSONStringScan.firstSpecialByte(in: $0, from: 0, nonASCIIIsSpecial: true) }
                        let lenient = bytes.withUnsafeBufferPointer { JSONStringScan.firstSpecialByte(in: $0, from: 0, nonASCIIIsSpecial: false) }
                        #expect(strict == (fillerSpecial ? 0 : position))
                        #expect(lenient == (nonASCII.contains(special) ? length : position))
                    }
                }
            }
        }
        let twoQuotes = Array(#"abcdefghij"klmnopqrstuv"wx"#.utf8)
        #expect(twoQuotes.withUnsafeBufferPointer { JSONStringScan.firstSpecialByte(in: $0, from: 11, nonASCIIIsSpecial: false) } == 23)
    }
}
