import AppStoreSimulator
import Decisions
import Foundation
import LiveReceiver
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import Synchronization
import TestSupport
import Testing

/// `serve`'s queue to the ledger on the open internet (issue 31): bounded, and a request
/// answered 503 is never written afterwards.
@Suite("serve's queue to the ledger under a stalled database")
struct BackpressureTests {
    static func body(_ jws: String) -> [UInt8] {
        Array(#"{"signedPayload":"\#(jws)"}"#.utf8)
    }

    static func sixtyNotifications() throws -> (RecoveryHarness, [String]) {
        let harness = try RecoveryHarness(customers: 40, seed: 31)
        let signed = try harness.scenario.notifications.prefix(60).map { try harness.api.signNotification($0) }
        try #require(signed.count == 60)
        return (harness, signed)
    }

    static func queueOfTwenty(wait: Duration = .seconds(4), write: Duration = .seconds(4)) -> BatchedIngest.Limits {
        var limits = BatchedIngest.Limits()
        limits.queuedNotifications = 20
        limits.wait = wait
        limits.write = write
        return limits
    }

    /// The ledger's notifications table is locked while 60 notifications arrive at once, until all are answered,
    /// against a queue of 20, one writer of batches of 5, a 1 s statement limit and a 6 s answer
    /// deadline: every request is answered 200 or 503, and once the lock is gone exactly the
    /// notifications answered 200 are in the ledger: none answered 503 was written later.
    @Test func aRequestAnswered503WhileTheDatabaseIsLockedIsNeverWritten() async throws {
        let (harness, signed) = try Self.sixtyNotifications()
        let limits = Self.queueOfTwenty(wait: .milliseconds(1_500), write: .seconds(1))
        try await TestDatabase.withFreshLedger { client, url in
            let serving = LedgerDatabase.client(url, logger: harness.logger, statementTimeout: limits.write)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await serving.run() }
                let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: serving, logger: harness.logger))
                // One writer of batches of 5: most of the queue waits behind a batch held by the lock.
                let batched = BatchedIngest(ingest: ingest, maximumBatch: 5, writers: 1, limits: limits)
                group.addTask { await batched.run() }
                let receiver = NotificationReceiver(ingest: ingest, batched: batched, deadline: .seconds(6))

                let locked = AsyncStream.makeStream(of: Void.self)
                let release = AsyncStream.makeStream(of: Void.self)
                let holder = Task {
                    try await client.withTransaction(logger: harness.logger) { connection in
                        try await connection.query("LOCK TABLE app_store.notifications IN ACCESS EXCLUSIVE MODE", logger: harness.logger)
                        locked.continuation.yield()
                        for await _ in release.stream { break }  // held until every request is answered
                    }
                }
                for await _ in locked.stream { break }
                let answers = await withTaskGroup(of: (Int, NotificationReceiver.Answer).self) { requests in
                    for (index, jws) in signed.enumerated() {
                        requests.addTask { (index, await receiver.answer(body: Self.body(jws))) }
                    }
                    return await requests.reduce(into: [Int: NotificationReceiver.Answer]()) { $0[$1.0] = $1.1 }
                }
                release.continuation.finish()
                try await holder.value
                // A batch still in a writer's hand ends within its statement time (1 s): a written
                // row that was answered 503 would show after it. Absence can only be waited for.
                try await Task.sleep(for: limits.write + .milliseconds(500))
                #expect(answers.count == 60)
                #expect(answers.values.allSatisfy { [200, 503].contains($0.status) })
                #expect(answers.values.contains { $0.status == 503 }, "the lock outlasted some requests' time")

                var stored: Set<String> = []
                for try await uuid in try await client.query("SELECT notification_uuid::text FROM app_store.notifications", logger: harness.logger).decode(String.self) {
                    stored.insert(uuid)
                }
                let uuids = signed.map { UnverifiedPayload.notificationUUID(of: $0)?.lowercased() ?? "" }
                let answered200 = Set(answers.filter { $0.value.status == 200 }.map { uuids[$0.key] })
                #expect(stored == answered200, "written: \(stored.count), answered 200: \(answered200.count)")
                #expect(batched.queued.notifications == 0 && batched.queued.bytes == 0)

                // With the lock gone, Apple's retries record them (several tries each: on a loaded
                // machine a 1 s statement limit may still be missed; a fresh-clone CI run under the
                // whole suite once saw one notification refused 10 times in a row, and later one refused 30 times).
                var recorded = 0
                var refused: [String] = []
                for jws in signed {
                    var statuses: [Int] = []
                    while statuses.last != 200, statuses.count < 60 { statuses.append(await receiver.answer(body: Self.body(jws)).status) }
                    if statuses.last == 200 { recorded += 1 } else { refused.append("\(Set(statuses).sorted())") }
                }
                #expect(recorded == signed.count, "never recorded, with the statuses answered: \(refused.prefix(3))")
                group.cancelAll()
            }
        }
    }

    /// One queue for every App Store a serve receives: with two apps and forgeries claiming one of
    /// them, the queue still holds at most its 20, whoever the 60 claim to be; the other 40 are
    /// refused at once. An unsigned POST gets no room of its own, nor another App Store's.
    @Test func severalAppStoresAndForgeriesShareTheQueuesOneBound() async throws {
        let apple = (pki: try TestPKI(TestPKI.Options(referenceTime: Date())), credentials: SimulatorCredentials())
        let one = try RecoveryHarness(customers: 20, seed: 41, environment: .production, apple: apple) { $0.bundleId = "com.example.one" }
        let two = try RecoveryHarness(customers: 20, seed: 42, environment: .sandbox, apple: apple) { $0.bundleId = "com.example.two" }
        var bodies = try one.scenario.notifications.prefix(20).map { Self.body(try one.api.signNotification($0)) }
        bodies += try two.scenario.notifications.prefix(20).map { Self.body(try two.api.signNotification($0)) }
        // Forgeries naming app one: a valid-looking JWS whose signature is another's.
        bodies += try one.scenario.notifications.dropFirst(20).prefix(20).map { notification in
            var jws = try one.api.signNotification(notification)
            jws.replaceSubrange(jws.index(jws.endIndex, offsetBy: -6)..., with: jws.hasSuffix("AAAAAA") ? "BBBBBB" : "AAAAAA")
            return Self.body(jws)
        }
        try #require(bodies.count == 60)
        let requestBodies = bodies
        try await TestDatabase.withFreshLedger { client, _ in
            let store = LedgerStore(client: client, logger: one.logger)
            let ingests = [NotificationIngest(verifier: try one.verifier(), store: store), NotificationIngest(verifier: try two.verifier(), store: store)]
            let batched = BatchedIngest(ingests: ingests, limits: Self.queueOfTwenty())  // not run: no writer
            let receiver = NotificationReceiver(ingests: ingests, batched: batched, deadline: .seconds(45))
            let (answers, queuedAtTheFortiethRefusal) = await withTaskGroup(of: NotificationReceiver.Answer.self) { requests in
                for body in requestBodies { requests.addTask { await receiver.answer(body: body) } }
                var answers: [NotificationReceiver.Answer] = []
                var queued: Int?
                for await answer in requests {
                    answers.append(answer)
                    if queued == nil, answers.filter({ $0 == .overloaded }).count == 40 { queued = batched.queued.notifications }
                }
                return (answers, queued)
            }
            let overloaded = answers.filter { $0 == .overloaded }.count
            #expect(overloaded == 40)
            #expect(queuedAtTheFortiethRefusal == 20, "the one bound held across App Stores and forgeries")
            #expect(batched.queued.notifications == 0 && batched.queued.bytes == 0, "the timed-out left the queue")
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.notifications") == 0)
        }
    }

    /// With no writer to take them (as when all are held by a stalled database), 20 fit in the
    /// queue and the other 40 are refused at once, 503 with Retry-After; the 20 are answered 503
    /// at their deadline and leave the queue, unwritten.
    @Test func theQueueRefusesWhatDoesNotFitAtOnceAndWhatTimesOutLeavesIt() async throws {
        let (harness, signed) = try Self.sixtyNotifications()
        let limits = Self.queueOfTwenty()
        try await TestDatabase.withFreshLedger { client, _ in
            // The deadline is long (45 s) so that, under the whole suite on two cores, all 60
            // reach the queue before the first 20 are given up (at 20 s, a fresh-clone run of the
            // suite once saw none of the 60 verified in time: all answered 503 at the deadline); the queue's bound is checked the
            // moment the 40th refusal is seen, not after a time. (Verifying one payload with the
            // same verifier first, to warm its chain cache, made 20 of the 60 answer 503 at the
            // deadline instead of being refused, in 3 runs of 3: not understood yet; see issue 32's note.)
            let verifier = try harness.verifier()
            let ingest = NotificationIngest(verifier: verifier, store: LedgerStore(client: client, logger: harness.logger))
            let batched = BatchedIngest(ingest: ingest, limits: limits)  // not run: no writer
            let receiver = NotificationReceiver(ingest: ingest, batched: batched, deadline: .seconds(45))
            let (answers, queuedAtTheFortiethRefusal) = await withTaskGroup(of: NotificationReceiver.Answer.self) { requests in
                for jws in signed { requests.addTask { await receiver.answer(body: Self.body(jws)) } }
                var answers: [NotificationReceiver.Answer] = []
                var queued: Int?
                for await answer in requests {
                    answers.append(answer)
                    if queued == nil, answers.filter({ $0 == .overloaded }).count == 40 { queued = batched.queued.notifications }
                }
                return (answers, queued)
            }
            let unavailable = answers.filter { if case .unavailable = $0 { true } else { false } }.count
            let overloaded = answers.filter { $0 == .overloaded }.count
            #expect(overloaded == 40, "\(unavailable) answered 503 at the deadline")
            #expect(queuedAtTheFortiethRefusal == 20, "the queue held its bound while the others were refused")
            #expect(answers.filter { $0.retryAfter == 5 }.count == 40, "Retry-After on each refusal")
            #expect(unavailable == 20)
            #expect(batched.queued.notifications == 0 && batched.queued.bytes == 0, "the timed-out left the queue")
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.notifications") == 0)
        }
    }

    /// A NUL character in `signedPayload` is no JWS's and PostgreSQL cannot store it: 400 at
    /// once, nothing written (it used to fail the batch's INSERT: 503, read as an outage).
    @Test func aNulCharacterIsABadRequestAndNothingIsWritten() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 32)
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            let receiver = NotificationReceiver(ingest: ingest)
            let answer = await receiver.answer(body: Array(#"{"signedPayload":"abc\u0000def"}"#.utf8))
            #expect(answer.status == 400)
            #expect(answer.text.contains("NUL"))
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.rejected_payloads") == 0)
        }
    }

    /// What the schema `app_store` takes on disk: tables, TOAST and indexes.
    static func ledgerBytes(_ client: PostgresClient) async throws -> Int {
        try await BackendLedgerTests.count(
            client,
            "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'app_store' AND c.relkind = 'r'"
        )
    }

    /// Issue 53, point 3: with a sample of 5 per reason and hour (`serve --rejections-kept-per-hour`),
    /// 300 distinct garbage bodies and 150 distinct tampered copies of a genuine notification of
    /// this app (its signature's bytes edited) are each answered 400, and 5 of each reason are
    /// written: before, each was a row of its own. The next hour of the clock keeps 5 more.
    @Test func distinctGarbageAndTamperedCopiesLeaveASamplePerReasonAndHour() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 34)
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            let receiver = NotificationReceiver(ingest: ingest, deadline: .seconds(120), keptRejectionsPerHour: 5)
            var generator = SystemRandomNumberGenerator()
            for index in 0..<300 {
                let answer = await receiver.routedAnswer(body: Self.body("garbage\(index).\(generator.next() as UInt64).x"))
                #expect(answer.answer == .rejected(.malformed))
                #expect(answer.notKept == (index >= 5))
            }
            let genuine = try harness.api.signNotification(try #require(harness.scenario.notifications.first))
            let signatureStart = try #require(genuine.lastIndex(of: ".")).utf16Offset(in: genuine) + 1
            var tampered: Set<String> = []
            for index in 0..<150 {
                var characters = Array(genuine)
                let position = signatureStart + 2 + index % 80
                characters[position] = characters[position] == (index < 80 ? "A" : "B") ? "C" : (index < 80 ? "A" : "B")
                tampered.insert(String(characters))
            }
            #expect(tampered.count == 150)
            for jws in tampered {
                let answer = await receiver.answer(body: Self.body(jws))
                #expect(answer == .rejected(.badSignature))
            }
            var rows: [String] = []
            for try await (reason, count) in try await client.query(
                "SELECT reason, count(*)::int FROM app_store.rejected_payloads GROUP BY reason ORDER BY reason", logger: harness.logger
            ).decode((String, Int).self) {
                rows.append("\(reason) \(count)")
            }
            #expect(rows == ["bad_signature 5", "malformed 5"])

            var sample = RejectionSample(keptPerHour: 2)
            let hour = Date(timeIntervalSince1970: 1_800_000_000)
            #expect([sample.keep("malformed", at: hour), sample.keep("malformed", at: hour), sample.keep("malformed", at: hour)] == [true, true, false])
            let otherReason = sample.keep("bad_signature", at: hour)
            let nextHour = sample.keep("malformed", at: hour + 3_600)
            #expect(otherReason && nextHour)
        }
    }

    /// Anyone can POST to serve: 300 bodies of 100 KB that are no signed payload (each different)
    /// grow the ledger by less than 3 MB (a summary each: digest, size, first bytes, reason),
    /// the same one again only counts. A payload Apple did sign but for another app is kept as a
    /// summary too (issue 53: anyone can obtain Apple's notifications of their own app, 13.5 KB a
    /// row whole), once: replayed, or re-signed as (r, n − s), which still verifies, it only counts.
    @Test func unprovenPayloadsAndOtherAppsPayloadsAreKeptAsSummariesOnceWhateverTheirSignaturesBytes() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 33)
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            // A deadline no loaded test machine reaches: this test is about what is kept.
            let receiver = NotificationReceiver(ingest: ingest, deadline: .seconds(120))
            let before = try await Self.ledgerBytes(client)
            var generator = SystemRandomNumberGenerator()
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
            var garbage: [String] = []
            for _ in 0..<300 {
                let part = { (count: Int) in String(decoding: (0..<count).map { _ in alphabet[Int(generator.next() % 64)] }, as: UTF8.self) }
                garbage.append(part(200) + "." + part(100_000) + "." + part(86))
            }
            for jws in garbage {
                let answer = await receiver.answer(body: Self.body(jws))
                #expect(answer.status == 400)
            }
            // The same bytes again: one more sighting of its row, not a row.
            #expect(await receiver.answer(body: Self.body(garbage[0])).status == 400)
            let grown = try await Self.ledgerBytes(client) - before
            #expect(grown < 3 * 1024 * 1024, "the ledger grew \(grown) bytes for 300 unproven payloads of 100 KB")
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.rejected_payloads") == 300)
            #expect(try await BackendLedgerTests.count(client, "SELECT max(times_seen) FROM app_store.rejected_payloads") == 2)
            #expect(try await BackendLedgerTests.count(client, "SELECT count(*) FROM app_store.rejected_payloads WHERE NOT kept_whole AND payload_bytes = \(garbage[0].utf8.count) AND octet_length(signed_payload) <= 256") == 300)

            let notification = try #require(harness.scenario.notifications.first)
            let otherApp = try harness.api.badlySigned(notification, .wrongBundle)
            let malleated = try #require(SignatureMalleation.malleated(otherApp))
            #expect(malleated != otherApp)
            // Sent 25 times as it came and 25 times re-signed (anyone holding one can): kept once,
            // as a summary, counted 50 times. Both copies verify: each is refused for its app.
            for jws in Array(repeating: otherApp, count: 25) + Array(repeating: malleated, count: 25) {
                let answer = await receiver.answer(body: Self.body(jws))
                #expect(answer == .rejected(.wrongBundle))
            }
            var kept: [String] = []
            for try await (payload, whole, seen) in try await client.query(
                "SELECT signed_payload, kept_whole, times_seen FROM app_store.rejected_payloads WHERE reason = 'wrong_bundle'", logger: harness.logger
            ).decode((String, Bool, Int).self) {
                #expect(!whole)
                #expect(seen == 50)
                kept.append(payload)
            }
            #expect(kept.count == 1)
            #expect(kept.first.map { otherApp.hasPrefix($0) && $0.utf8.count <= 256 } == true)
        }
    }
}
