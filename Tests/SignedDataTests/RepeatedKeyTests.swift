import AppStoreSimulator
import Crypto
import Foundation
import SignedData
import Testing

@testable import SignedData

/// Issue 67, point 3: a key given twice is malformed wherever it stands (the body, the JWS
/// header, a payload, an object nested in one), however it is spelled, and the fast path and the
/// fallback refuse it alike.
@Suite("A JSON key given twice")
struct RepeatedKeyTests {
    @Test(arguments: [
        (#"{"a":1,"a":2}"#, "a"),
        (#"{"a":1,"b":{"c":1,"c":2}}"#, "c"),
        (#"{"list":[{"x":1},{"y":1,"y":[]}]}"#, "y"),
        (#"{"signedPayload":"x","signed\u0050ayload":"y"}"#, "signedPayload"),
        (#"{"\ud83d\ude00":1,"😀":2}"#, "😀"),
        (#"{"e\u0301":1,"é":2}"#, "é"),
        (" { \"k\" : null ,\n \"k\" : true } ", "k"),
    ])
    func theFirstKeyGivenTwiceIsFoundUnescaped(_ text: String, _ key: String) {
        #expect(RepeatedJSONKey.first(in: Array(text.utf8)) == key)
    }

    @Test(arguments: [
        #"{"a":1,"b":2,"A":3}"#, #"{"a":{"a":{"a":1}}}"#, #"[{"a":1},{"a":2}]"#, #"{"a":"\"a\"","b":"a"}"#, "{}", "[]", "7", #""a""#,
        #"{"a":1"#, "not json", "",
    ])
    func distinctKeysAndTextThatIsNotJSONHaveNone(_ text: String) {
        #expect(RepeatedJSONKey.first(in: Array(text.utf8)) == nil)
    }

    @Test func deepNestingIsNotFollowedWithoutBoundAndIsUnreadable() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(RepeatedJSONKey.scan(Array(deep.utf8)) == .unreadable)
        let nested = String(repeating: "[", count: 300) + #"{"a":1}"# + String(repeating: "]", count: 300)
        #expect(RepeatedJSONKey.scan(Array(nested.utf8)) == .distinct)
    }

    /// What Foundation reads more leniently than the scan never reaches it (review of issue 67):
    /// a trailing comma before the repeated key, a byte-order mark, nesting past 512 levels.
    @Test func aBodyTheScanCannotReadIsRefusedNotHandedToFoundation() {
        let trailingComma = #"{"a":[1,],"signedPayload":"A","signedPayload":"B"}"#
        #expect(RepeatedJSONKey.scan(Array(trailingComma.utf8)) == .unreadable)
        #expect(NotificationBody.signedPayload(in: Array(trailingComma.utf8)) == .failure(.notAnObject))
        let bom = [0xEF, 0xBB, 0xBF] + Array(#"{"signedPayload":"A","signedPayload":"B"}"#.utf8)
        #expect(NotificationBody.signedPayload(in: bom) == .failure(.repeatedKey("signedPayload")))
        #expect(NotificationBody.signedPayload(fromInput: bom) == .failure(.repeatedKey("signedPayload")))
        let deep = #"{"x":"# + String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
            + #","signedPayload":"A","signedPayload":"B"}"#
        #expect(NotificationBody.signedPayload(in: Array(deep.utf8)) == .failure(.notAnObject))
        let bomBody = [0xEF, 0xBB, 0xBF] + Array(#"{"signedPayload":"a.b.c"}"#.utf8)
        #expect(NotificationBody.signedPayload(in: bomBody) == .success("a.b.c"))
    }

    /// Review of issue 67: the fast path's key comparisons stay few on a body of many keys.
    @Test func anObjectOfManyKeysIsDeclinedByTheFastPathAndScannedOnce() {
        let many = "{" + (0..<30_000).map { "\"k\($0)\":0" }.joined(separator: ",") + #","k7":1}"#
        #expect(SimpleJSONObject.parse(Array(many.utf8)) == nil)
        #expect(RepeatedJSONKey.scan(Array(many.utf8)) == .repeated("k7"))
        let sixtyThree = "{" + (0..<63).map { "\"k\($0)\":0" }.joined(separator: ",") + "}"
        #expect(SimpleJSONObject.parse(Array(sixtyThree.utf8)) != nil)
    }

    @Test func theFastPathDeclinesAnyKeyGivenTwiceKnownOrNot() {
        #expect(SimpleJSONObject.parse(Array(#"{"unknown":1,"unknown":2}"#.utf8)) == nil)
        #expect(SimpleJSONObject.parse(Array(#"{"a":{"b":1,"b":1}}"#.utf8)) == nil)
        #expect(SimpleJSONObject.parse(Array(#"{"a":1,"b":1}"#.utf8)) != nil)
    }

    @Test func aBodyWithAKeyTwiceIsRefusedWhicheverValueComesFirst() {
        for body in [
            #"{"signedPayload":"a.b.c","signedPayload":"d.e.f"}"#, #"{"signedPayload":"d.e.f","signedPayload":"a.b.c"}"#,
            #"{"signedPayload":"a.b.c","x":1,"x":1}"#, #"{"signedPayload":"a.b.c","signedPayload":"a.b.c"}"#,
        ] {
            #expect(NotificationBody.signedPayload(in: Array(body.utf8)) == .failure(.repeatedKey(body.contains("\"x\"") ? "x" : "signedPayload")), "\(body)")
            #expect(NotificationBody.signedPayload(fromInput: Array(body.utf8)) == .failure(.repeatedKey(body.contains("\"x\"") ? "x" : "signedPayload")))
        }
    }

    @Test func aNULAnywhereInTheInputIsRefusedAsSuch() {
        #expect(NotificationBody.signedPayload(fromInput: [0]) == .failure(.holdsNUL))
        #expect(NotificationBody.signedPayload(fromInput: Array("a.b\u{0}.c".utf8)) == .failure(.holdsNUL))
        #expect(NotificationBody.signedPayload(in: Array(#"{"signedPayload":"a\u0000b"}"#.utf8)) == .failure(.holdsNUL))
        #expect(NotificationBody.signedPayload(fromInput: Array("\u{FEFF} a.b.c\n".utf8)) == .success("a.b.c"))
    }

    @Test func aSignedPayloadOrHeaderWithAKeyTwiceIsMalformedThoughItsSignatureHolds() async throws {
        let fixture = try Fixture()
        let verifier = try fixture.verifier()
        let genuine = String(decoding: try JSONEncoder().encode(try fixture.notification()), as: UTF8.self)
        for (edit, key) in [
            ({ (text: String) in "{\"notificationType\":\"TEST\"," + text.dropFirst() }, "notificationType"),
            ({ (text: String) in "{\"unknownField\":1,\"unknownField\":2," + text.dropFirst() }, "unknownField"),
            ({ (text: String) in text.replacingOccurrences(of: "\"data\":{", with: "\"data\":{\"bundleId\":\"com.attacker\",") }, "bundleId"),
        ] {
            let outcome = await verifier.verifyNotification(try fixture.signer.sign(json: Array(edit(genuine).utf8)))
            #expect(outcome.reason == .malformed, "\(key)")
            #expect(outcome.rejection?.detail.contains("\"\(key)\" more than once") == true, "\(String(describing: outcome.rejection))")
        }
        // The header: alg given twice, the second claiming ES256.
        let jws = try fixture.signedNotification()
        let entries = [try TestPKI.x5cEntry(fixture.pki.leaf), try TestPKI.x5cEntry(fixture.pki.intermediate), try TestPKI.x5cEntry(fixture.pki.root)]
        let header = #"{"alg":"none","alg":"ES256","x5c":[""# + entries.joined(separator: "\",\"") + #""]}"#
        let input = Base64URL.encode(Array(header.utf8)) + "." + part(1, of: jws)
        let signature = try fixture.pki.leafKey.signature(for: Array(input.utf8))
        let outcome = await verifier.verifyNotification(input + "." + Base64URL.encode(signature.rawRepresentation))
        #expect(outcome.reason == .malformed)
        #expect(outcome.rejection?.detail.contains("header gives the key \"alg\"") == true, "\(String(describing: outcome.rejection))")
    }
}

/// Issue 67, point 5: a date no payload can hold is malformed, with its field named.
@Suite("Dates out of range")
struct PayloadDateRangeTests {
    @Test(arguments: [Int64(-1), -86_400_000, 253_402_300_800_000, Int64.max, Int64.min])
    func aNotificationsSignedDateOutOfRangeIsMalformedAndNamed(_ value: Int64) async throws {
        let fixture = try Fixture()
        var notification = try fixture.notification()
        notification.signedDate = value
        let outcome = try await fixture.verifier().verifyNotification(try fixture.signer.sign(notification))
        #expect(outcome.reason == .malformed)
        #expect(outcome.rejection?.detail.contains("signedDate is \(value) ms") == true, "\(String(describing: outcome.rejection))")
    }

    @Test(arguments: ["expiresDate", "purchaseDate", "originalPurchaseDate", "revocationDate", "signedDate"])
    func aTransactionDateOutOfRangeRejectsTheNotificationAsNested(_ field: String) async throws {
        let fixture = try Fixture()
        var transaction = Fixture.transaction()
        switch field {
        case "expiresDate": transaction.expiresDate = -5
        case "purchaseDate": transaction.purchaseDate = -5
        case "originalPurchaseDate": transaction.originalPurchaseDate = -5
        case "revocationDate": transaction.revocationDate = -5
        default: transaction.signedDate = -5
        }
        let outcome = try await fixture.verifier().verifyNotification(try fixture.signer.sign(try fixture.notification(transaction: transaction)))
        #expect(outcome.reason == .nestedPayloadRejected)
        #expect(outcome.rejection?.detail.contains("\(field) is -5 ms") == true, "\(String(describing: outcome.rejection))")
    }

    @Test func aDateOfTenToTheThirtiethIsMalformedAndNamed() async throws {
        let fixture = try Fixture()
        let text = String(decoding: try JSONEncoder().encode(Fixture.transaction()), as: UTF8.self)
            .replacingOccurrences(of: #""expiresDate":[0-9]+"#, with: "\"expiresDate\":1000000000000000000000000000000", options: .regularExpression)
        let outcome = try await fixture.verifier().verifyTransaction(try fixture.signer.sign(json: Array(text.utf8)))
        #expect(outcome.reason == .malformed)
        #expect(outcome.rejection?.detail.contains("expiresDate") == true, "\(String(describing: outcome.rejection?.detail))")
    }

    @Test func theEdgesOfTheRangeAreDates() {
        #expect(PayloadDates.rejection(["signedDate": 0]) == nil)
        #expect(PayloadDates.rejection(["signedDate": PayloadDates.latest]) == nil)
        #expect(PayloadDates.rejection(["signedDate": nil]) == nil)
        #expect(PayloadDates.rejection(["signedDate": PayloadDates.latest + 1]) != nil)
        #expect(PayloadDates.rejection(["signedDate": -1]) != nil)
        // 9999-12-31T23:59:59.999Z, as Foundation computes it.
        #expect(Date(timeIntervalSince1970: Double(PayloadDates.latest) / 1000).formatted(.iso8601) == "9999-12-31T23:59:59Z")
    }
}
