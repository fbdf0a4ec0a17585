import AppStoreSimulator
import Foundation
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// Issue 67, points 2, 3 and 5: input that `serve`, `ingest` and `verify` must read alike and
/// refuse alike, through the built binaries (the release build too): a NUL, a key given twice in
/// the body or inside a signed payload, a date no payload can hold. Each is malformed (serve 400,
/// ingest and verify 65) and nothing of it is recorded.
@Suite("serve, ingest and verify refuse hostile input alike")
struct HostileInputTests {
    /// `jws`'s payload as a JSON object.
    static func payload(of jws: String) throws -> [String: Any] {
        let part = jws.split(separator: ".")[1]
        let bytes = try #require(Base64URL.decode(part))
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    /// `object` as JSON text, with each `"__NUMBER_n__"` string replaced by `numbers[n]` written as is
    /// (JSONSerialization cannot write 10^30 as an integer).
    static func text(_ object: [String: Any], numbers: [String] = []) throws -> String {
        var text = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
        for (index, number) in numbers.enumerated() { text = text.replacingOccurrences(of: "\"__NUMBER_\(index)__\"", with: number) }
        return text
    }

    /// A notification of `harness` re-signed by its App Store (a genuine signature) after `edit`
    /// changed its payload's text or its transaction's text.
    static func resigned(
        _ harness: RecoveryHarness, _ jws: String, notification edit: (String) -> String = { $0 },
        transaction editTransaction: (([String: Any]) throws -> String)? = nil
    ) throws -> String {
        let signer = try harness.api.pki.signer()
        var notification = try payload(of: jws)
        if let editTransaction {
            var data = try #require(notification["data"] as? [String: Any])
            let transaction = try payload(of: try #require(data["signedTransactionInfo"] as? String))
            data["signedTransactionInfo"] = try signer.sign(json: Array(try editTransaction(transaction).utf8))
            notification["data"] = data
        }
        return try signer.sign(json: Array(edit(try text(notification)).utf8))
    }

    static func notifications(_ client: PostgresClient) async throws -> Int {
        for try await count in try await client.query("SELECT count(*) FROM app_store.notifications").decode(Int.self) { return count }
        return 0
    }

    /// Each input through all three: serve's status, ingest's and verify's exit codes and what they said.
    struct Answers {
        var serve: (status: Int, text: String)
        var ingest: BuiltBinary.Result
        var verify: BuiltBinary.Result
    }

    static func answers(_ body: String, serve base: String, environment: [String: String]) async throws -> Answers {
        Answers(
            serve: try await ServeCommandTests.post(base + "/apple/notifications", body),
            ingest: try await BuiltBinary.run(["ingest", "-"], environment: environment, standardInput: body),
            verify: try await BuiltBinary.run(["verify", "-"], environment: environment, standardInput: body)
        )
    }

    /// `serve` names what is wrong only in a body (it takes nothing else: a bare JWS is "not Apple's body").
    static func expectRefused(_ name: String, _ answers: Answers, saying words: String? = nil, body: Bool = true) {
        #expect(answers.serve.status == 400, "\(name): serve answered \(answers.serve.status) \(answers.serve.text)")
        #expect(answers.ingest.exitCode == 65, "\(name): ingest exited \(answers.ingest.exitCode): \(answers.ingest.combined)")
        #expect(answers.verify.exitCode == 65, "\(name): verify exited \(answers.verify.exitCode): \(answers.verify.combined)")
        #expect(!answers.ingest.combined.lowercased().contains("database"), "\(name): ingest blamed the database: \(answers.ingest.combined)")
        if let words {
            #expect(!body || answers.serve.text.contains(words), "\(name): serve said \(answers.serve.text)")
            #expect(answers.ingest.standardError.contains(words), "\(name): ingest said \(answers.ingest.standardError)")
            #expect(answers.verify.standardError.contains(words), "\(name): verify said \(answers.verify.standardError)")
        }
    }

    @Test func aNULARepeatedKeyAndADateOutOfRangeAreMalformedForServeIngestAndVerifyAndNothingIsRecorded() async throws {
        let harness = try RecoveryHarness(customers: 4, seed: 671)
        let delivered = harness.scenario.deliveredNotifications
        let genuine = try harness.api.signNotification(delivered[0])
        let other = try harness.api.signNotification(delivered[1])
        let forged = String(genuine.dropLast(4)) + (genuine.hasSuffix("AAAA") ? "BBBB" : "AAAA")
        try await RunCommandTests.withSetup(harness, seed: false) { environment, client, scratch in
            let (base, serve, _) = try await ServeCommandTests.spawnServe(arguments: [], environment: environment, scratch: scratch.path)
            defer { serve.send(SIGKILL) }

            // Point 2: a NUL, bare, as a JSON escape and raw inside the body, inside a bare JWS.
            for (name, body) in [
                ("a NUL alone", "\u{0}"), ("a NUL escaped in the body", "{\"signedPayload\":\"a\\u0000b\"}"),
                ("a NUL inside the body's string", "{\"signedPayload\":\"\(genuine.prefix(20))\u{0}\(genuine.dropFirst(20))\"}"),
                ("a NUL inside a bare JWS", String(genuine.prefix(20)) + "\u{0}" + genuine.dropFirst(20)),
            ] {
                Self.expectRefused(name, try await Self.answers(body, serve: base, environment: environment), saying: "NUL", body: body.hasPrefix("{"))
            }

            // Point 3: the body's key twice, genuine first and forged first; then keys given twice
            // inside a genuinely signed payload, at the top, in `data`, spelled with an escape.
            for (name, body) in [
                ("genuine then forged", "{\"signedPayload\":\"\(genuine)\",\"signedPayload\":\"\(forged)\"}"),
                ("forged then genuine", "{\"signedPayload\":\"\(forged)\",\"signedPayload\":\"\(genuine)\"}"),
                ("genuine then another genuine", "{\"signedPayload\":\"\(genuine)\",\"signedPayload\":\"\(other)\"}"),
                ("escaped spelling", "{\"signedPayload\":\"\(genuine)\",\"signed\\u0050ayload\":\"\(other)\"}"),
                ("another key twice", "{\"signedPayload\":\"\(genuine)\",\"x\":1,\"x\":2}"),
            ] {
                Self.expectRefused(name, try await Self.answers(body, serve: base, environment: environment), saying: "more than once")
            }
            let uuid = delivered[0].uuid
            for (name, jws) in [
                ("notificationType twice", try Self.resigned(harness, genuine) { $0.replacingOccurrences(of: "{", with: "{\"notificationType\":\"TEST\",", options: .anchored) }),
                ("notificationUUID twice, escaped", try Self.resigned(harness, genuine) {
                    $0.replacingOccurrences(of: "{", with: "{\"notification\\u0055UID\":\"\(UUID().uuidString)\",", options: .anchored)
                }),
                ("bundleId twice in data", try Self.resigned(harness, genuine) { $0.replacingOccurrences(of: "\"data\":{", with: "\"data\":{\"bundleId\":\"com.attacker\",") }),
                ("transactionId twice in the transaction", try Self.resigned(harness, genuine, transaction: { transaction in
                    try Self.text(transaction).replacingOccurrences(of: "{", with: "{\"transactionId\":\"1\",", options: .anchored)
                })),
            ] {
                Self.expectRefused(name, try await Self.answers("{\"signedPayload\":\"\(jws)\"}", serve: base, environment: environment))
                let verified = try await BuiltBinary.run(["verify", "-"], environment: environment, standardInput: jws)
                #expect(verified.standardError.contains("more than once"), "\(name): \(verified.standardError)")
            }

            // Point 5: dates no payload holds, in the notification and in its transaction.
            for (field, value) in [("signedDate", "-1"), ("signedDate", "1000000000000000000000000000000"), ("signedDate", "253402300800000")] {
                let jws = try Self.resigned(harness, genuine) { text in
                    text.replacingOccurrences(of: #""signedDate":[0-9]+"#, with: "\"\(field)\":\(value)", options: .regularExpression)
                }
                let answers = try await Self.answers("{\"signedPayload\":\"\(jws)\"}", serve: base, environment: environment)
                Self.expectRefused("the notification's \(field) \(value)", answers)
                #expect(answers.verify.standardError.contains(field), "\(field) \(value): \(answers.verify.standardError)")
                #expect(answers.ingest.standardError.contains("signedDate"), "\(field) \(value): \(answers.ingest.standardError)")
            }
            for (field, value) in [("expiresDate", "-5"), ("expiresDate", "1000000000000000000000000000000"), ("purchaseDate", "-86400000"),
                ("purchaseDate", "1000000000000000000000000000000")] {
                let jws = try Self.resigned(harness, genuine, transaction: { transaction in
                    var transaction = transaction
                    transaction[field] = "__NUMBER_0__"
                    return try Self.text(transaction, numbers: [value])
                })
                let answers = try await Self.answers("{\"signedPayload\":\"\(jws)\"}", serve: base, environment: environment)
                Self.expectRefused("the transaction's \(field) \(value)", answers)
                #expect(answers.verify.standardError.contains(field), "\(field) \(value): \(answers.verify.standardError)")
                #expect(answers.ingest.standardError.contains(field), "\(field) \(value): \(answers.ingest.standardError)")
            }

            // Nothing of it recorded; the genuine notification alone then is, by each path once.
            #expect(try await Self.notifications(client) == 0)
            #expect(try await ServeCommandTests.post(base + "/apple/notifications", "{\"signedPayload\":\"\(genuine)\"}").0 == 200)
            let again = try await BuiltBinary.run(["ingest", "-"], environment: environment, standardInput: "{\"signedPayload\":\"\(genuine)\"}")
            #expect(again.exitCode == 4, "already recorded: \(again.combined)")
            #expect(try await Self.notifications(client) == 1)
            var recorded: [String] = []
            for try await value in try await client.query("SELECT notification_uuid::text FROM app_store.notifications").decode(String.self) {
                recorded.append(value)
            }
            #expect(recorded == [uuid.lowercased()])
        }
    }
}
