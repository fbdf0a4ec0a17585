import AppStoreSimulator
@testable import Decisions
import Foundation
import Reports
import Ledger
import Logging
import PostgresNIO
import Reconciliation
import TestSupport
import Testing

/// Re-delivery of recovered notifications to the team's own webhook handler (`--deliver-to`),
/// against a real HTTP receiver and a real PostgreSQL.
@Suite("Re-delivery to the team's webhook handler")
struct RedeliveryTests {
    /// Rounds a few milliseconds apart, so that the tests do not wait out a real backoff.
    static let quickPolicy = DeliveryPolicy(rounds: 12, firstDelay: .milliseconds(5), maximumDelay: .milliseconds(20))

    static func request(_ harness: RecoveryHarness, mode: RunMode, to url: String) throws -> ReconciliationRun.Request {
        let window = try harness.window()
        return ReconciliationRun.Request(
            kind: .run, window: .fixed(start: window.start, end: window.end), mode: mode, deliverTo: try DeliveryTarget(url), deliveryPolicy: quickPolicy
        )
    }

    /// The missed notifications a run recorded, by UUID (lower case), with their stored JWS.
    static func recovered(_ client: PostgresClient) async throws -> [String: String] {
        var found: [String: String] = [:]
        let rows = try await client.query("SELECT notification_uuid::text, signed_payload FROM app_store.notifications WHERE source = 'history'", logger: TestDatabase.logger)
        for try await (uuid, payload) in rows.decode((String, String).self) { found[uuid] = payload }
        return found
    }

    /// A simulated App Store, a receiver standing for the team's handler, and a fresh ledger
    /// holding what the live server received.
    struct World: Sendable {
        let harness: RecoveryHarness
        let receiver: WebhookReceiver
        let baseURL: String
        let handler: String
        let client: PostgresClient
        let url: DatabaseURL
        var store: LedgerStore { LedgerStore(client: client, logger: harness.logger) }

        /// A run of the whole window with re-delivery to the receiver.
        func run(_ mode: RunMode = .apply, policy: DeliveryPolicy = RedeliveryTests.quickPolicy, stop: StopRequest = StopRequest()) async throws -> RecoveryReport {
            RecoveryReport(try await result(mode, policy: policy, stop: stop))
        }

        /// The same run's result.
        func result(_ mode: RunMode = .apply, policy: DeliveryPolicy = RedeliveryTests.quickPolicy, stop: StopRequest = StopRequest()) async throws -> RunResult {
            var request = try RedeliveryTests.request(harness, mode: mode, to: handler)
            request.deliveryPolicy = policy
            let run = ReconciliationRun(
                client: try harness.client(baseURL), verifier: try harness.verifier(), store: store, databaseURL: url, logger: harness.logger, stop: stop
            )
            return try await run.execute(request)
        }

        /// The missed notifications the runs recorded, by UUID (lower case), with their stored JWS.
        func recovered() async throws -> [String: String] { try await RedeliveryTests.recovered(client) }
    }

    static func withWorld(_ harness: RecoveryHarness, _ receiver: WebhookReceiver, _ body: @Sendable (World) async throws -> Void) async throws {
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            try await receiver.withRunning { handler in
                try await TestDatabase.withFreshLedger { client, url in
                    try await harness.seedDeliveredNotifications(LedgerStore(client: client, logger: harness.logger))
                    try await body(World(harness: harness, receiver: receiver, baseURL: baseURL, handler: handler, client: client, url: url))
                }
            }
        }
    }

    @Test func aRunDeliversExactlyTheMissedNotificationsOriginalBodiesInSignedDateOrderOnceAndADryRunOnlyListsThem() async throws {
        let receiver = WebhookReceiver()
        try await Self.withWorld(try RecoveryHarness(customers: 60, seed: 71, outageHours: 30), receiver) { world in
            let dry = try await world.run(.dryRun)
            #expect(receiver.received.isEmpty, "a dry run sends nothing")
            let listed = try #require(dry.redelivery?.wouldDeliver)
            #expect(listed.count == dry.counts.missed && listed.count > 10)

            let report = try await world.run()
            let recovered = try await world.recovered()
            #expect(recovered.count == report.counts.missed)
            let received = receiver.received
            #expect(received.map(\.notificationUUID) == listed, "delivered what the dry run listed, in its order")
            #expect(Set(received.compactMap(\.notificationUUID)) == Set(recovered.keys), "exactly the missed notifications")
            #expect(received.count == recovered.count, "each once")
            for request in received {
                #expect(request.method == "POST" && request.path == "/apple/notifications" && request.contentType == "application/json")
                let uuid = try #require(request.notificationUUID)
                #expect(request.body == "{\"signedPayload\":\"\(recovered[uuid] ?? "")\"}", "the original signed body, as Apple sends it")
            }
            let dates = received.compactMap(\.signedDate)
            #expect(dates.count == received.count && dates == dates.sorted(), "in signedDate order")
            #expect(report.redelivery?.delivered == recovered.count && report.redelivery?.failed == 0 && report.redelivery?.pending == 0)
            #expect(report.markdown().contains("Delivered (answered 2xx) | \(recovered.count)"))

            // The next run recovers nothing new and sends nothing again.
            let again = try await world.run()
            #expect(again.redelivery?.delivered == 0)
            #expect(receiver.received.count == received.count)
        }
    }

    @Test func aHandlerThatRefusesHalfItsRequestsGetsEveryNotificationAndNoneAgainAfterItsRecorded2xx() async throws {
        // Every other request refused, alternating 500 and 503, and a few with no useful answer (404).
        let receiver = WebhookReceiver { index in index % 2 == 0 ? 200 : (index % 6 == 1 ? 500 : (index % 6 == 3 ? 503 : 404)) }
        try await Self.withWorld(try RecoveryHarness(customers: 60, seed: 72, outageHours: 30), receiver) { world in
            let report = try await world.run()
            let recovered = try await world.recovered()
            let received = receiver.received
            let accepted = received.filter { $0.status < 300 }
            #expect(received.count > recovered.count, "refusals were retried")
            #expect(Set(accepted.compactMap(\.notificationUUID)) == Set(recovered.keys), "every notification ends delivered")
            #expect(accepted.count == recovered.count, "none delivered twice")
            // Nothing is sent after its 2xx.
            for request in accepted {
                #expect(!received.contains { $0.index > request.index && $0.notificationUUID == request.notificationUUID })
            }
            #expect(report.redelivery?.delivered == recovered.count && report.redelivery?.pending == 0)
            var attempts = 0
            for try await value in try await world.client.query("SELECT sum(attempts)::int FROM app_store.deliveries WHERE delivered_at IS NOT NULL").decode(Int.self) {
                attempts = value
            }
            #expect(attempts == received.count, "every attempt recorded")
        }
    }

    @Test func aHandlerThatNeverAcceptsLeavesEverythingPendingAndTheRunSaysSo() async throws {
        let receiver = WebhookReceiver { _ in 503 }
        try await Self.withWorld(try RecoveryHarness(customers: 20, seed: 73, outageHours: 30), receiver) { world in
            let report = try await world.run(policy: DeliveryPolicy(rounds: 3, firstDelay: .milliseconds(5)))
            let missed = report.counts.missed
            #expect(missed > 0)
            #expect(report.redelivery?.delivered == 0 && report.redelivery?.failed == missed && report.redelivery?.pending == missed)
            #expect(receiver.received.count == 3 * missed, "three rounds")
            #expect(report.hasProblems && report.outcome == .succeededWithRejections)
            #expect(try await world.store.pendingDeliveryCount(to: world.handler) == missed, "kept for the next run")
        }
    }

    @Test func aRedirectIsNotFollowedAndCountsAsARefusal() async throws {
        let receiver = WebhookReceiver { _ in 307 }
        try await Self.withWorld(try RecoveryHarness(customers: 20, seed: 75, outageHours: 30), receiver) { world in
            let report = try await world.run(policy: DeliveryPolicy(rounds: 2, firstDelay: .milliseconds(5)))
            #expect(report.counts.missed > 0)
            #expect(receiver.received.allSatisfy { $0.path == "/apple/notifications" }, "nothing went where the redirect pointed")
            #expect(receiver.received.count == 2 * report.counts.missed)
            #expect(report.redelivery?.delivered == 0 && report.redelivery?.pending == report.counts.missed && report.undelivered == report.counts.missed)
        }
    }

    @Test func aHandlerThatDoesNotAnswerEndsEachRoundAfterThreeTimeoutsNotOnePerNotification() async throws {
        let receiver = WebhookReceiver(latency: .milliseconds(600))
        try await Self.withWorld(try RecoveryHarness(customers: 20, seed: 77, outageHours: 30), receiver) { world in
            let report = try await world.run(policy: DeliveryPolicy(rounds: 2, firstDelay: .milliseconds(5), requestTimeout: .milliseconds(100)))
            #expect(report.counts.missed > 3)
            #expect(receiver.received.count == 6, "three unanswered POSTs end each of the two rounds")
            #expect(report.redelivery?.delivered == 0 && report.redelivery?.pending == report.counts.missed && report.hasProblems)
        }
    }

    @Test func aStopDuringDeliveryRecordsTheRunInterruptedAndTheNextRunSendsTheRestOnce() async throws {
        let stop = StopRequest()
        let receiver = WebhookReceiver { index in
            if index == 4 { stop.request() }
            return 200
        }
        try await Self.withWorld(try RecoveryHarness(customers: 60, seed: 76, outageHours: 30), receiver) { world in
            let stopped = try await world.result(stop: stop)
            #expect(stopped.ending == .stopped && stopped.outcome == .interrupted)
            #expect(receiver.received.count == 5, "the POST in hand finished, no other began")
            var outcome = ""
            for try await value in try await world.client.query("SELECT outcome FROM app_store.runs").decode(String.self) { outcome = value }
            #expect(outcome == "interrupted")
            // The stopped run's lock goes with its connection, closed as it ended.
            let deadline = Date().addingTimeInterval(20)
            while try await world.store.runLockHeld(), Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            let report = try await world.run()
            let recovered = try await world.recovered()
            #expect(report.redelivery?.delivered == recovered.count - 5 && report.redelivery?.pending == 0)
            let uuids = receiver.received.compactMap(\.notificationUUID)
            #expect(uuids.count == recovered.count && Set(uuids) == Set(recovered.keys), "each once")
        }
    }

    @Test func aTargetIsHTTPSOrPlainHTTPToLoopbackOnlyAndIsShownWithoutItsSecrets() throws {
        #expect(throws: DeliveryTargetError.self) { try DeliveryTarget("http://handler.example.com/apple") }
        #expect(throws: DeliveryTargetError.self) { try DeliveryTarget("ftp://127.0.0.1/x") }
        #expect(throws: DeliveryTargetError.self) { try DeliveryTarget("not a url") }
        _ = try DeliveryTarget("http://127.0.0.1:8080/apple")
        _ = try DeliveryTarget("http://[::1]:8080/apple")
        #expect(throws: DeliveryTargetError.self) { try DeliveryTarget("https://user:s3cret@handler.example.com/apple") }
        let target = try DeliveryTarget("https://handler.example.com/hooks/p4thsecret?token=s3cret")
        #expect(target.description == "https://handler.example.com/…?…")
        // The ledger's key: no query, a digest of the whole URL in its place (as migration 0018 computes it).
        #expect(target.key.hasPrefix("https://handler.example.com/hooks/p4thsecret#query-sha256="))
        #expect(!target.key.contains("s3cret") && target.key.count == "https://handler.example.com/hooks/p4thsecret#query-sha256=".count + 16)
        #expect(try DeliveryTarget("https://handler.example.com/hooks/p4thsecret?token=other").key != target.key)
        #expect(try DeliveryTarget("https://handler.example.com/apple").key == "https://handler.example.com/apple")
        #expect(try DeliveryTarget("https://handler.example.com:8443").description == "https://handler.example.com:8443")
    }

    /// A credential comes from the environment or a file, named in the header's value; what
    /// cannot be read is an error that names the variable or file, never a value.
    @Test func deliveryHeadersReadTheirValuesFromTheEnvironmentOrAFileAndNeverShowThem() throws {
        let environment = ["HANDLER_TOKEN": "t0ken", "EMPTY": ""]
        let files = ["/run/secrets/handler": "f1le\n"]
        let read = { (path: String) throws -> String in
            guard let content = files[path] else { throw CocoaError(.fileNoSuchFile) }
            return content
        }
        let headers = try DeliveryHeaders.parse(
            ["Authorization: Bearer $HANDLER_TOKEN", "X-Key: ${file:/run/secrets/handler}", "X-Both: ${HANDLER_TOKEN}-$$-literal"], environment: environment, readFile: read)
        #expect(headers.fields.map(\.name) == ["Authorization", "X-Key", "X-Both"])
        #expect(headers.fields.map(\.value) == ["Bearer t0ken", "f1le", "t0ken-$-literal"])
        #expect(!headers.description.contains("t0ken") && !headers.description.contains("f1le"))
        for (spec, message) in [
            ("Authorization: Bearer $MISSING", "MISSING"), ("Authorization: Bearer $EMPTY", "EMPTY"), ("X: ${file:/nope}", "/nope"),
            ("no colon", "Name: value"), ("Content-Type: text/plain", "Content-Type"), ("Bad Name: x", "not a header name"), ("X: $", "$$"),
            ("X: ${HANDLER_TOKEN", "closing"),
        ] {
            let error = #expect(throws: DeliveryHeaderError.self) { try DeliveryHeaders.parse([spec], environment: environment, readFile: read) }
            #expect(error?.description.contains(message) == true, "\(spec): \(error?.description ?? "")")
            #expect(error?.description.contains("t0ken") == false)
        }
        let lineBreak = #expect(throws: DeliveryHeaderError.self) {
            try DeliveryHeaders.parse(["X: $SPLIT"], environment: ["SPLIT": "a\r\nInjected: yes"], readFile: read)
        }
        #expect(lineBreak?.description.contains("line break") == true)
    }

    @Test func laterRoundsWaitLongerUpToTheCap() {
        let policy = DeliveryPolicy(rounds: 6, firstDelay: .seconds(1), maximumDelay: .seconds(5))
        #expect((1...6).map { policy.delay(beforeRound: $0) } == [.zero, .seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)])
        #expect(DeliveryPolicy.delivers(status: 200) && DeliveryPolicy.delivers(status: 204) && !DeliveryPolicy.delivers(status: 302))
        #expect(!DeliveryPolicy.delivers(status: 500))
    }

    /// Issue 48, point 8: a notification's later POSTs may wait longer than its first (twice the
    /// one before), up to a bound, so that a handler slower than the timeout answers one of them.
    @Test func eachLaterPostOfANotificationMayWaitTwiceAsLongUpToTheBound() {
        let policy = DeliveryPolicy(requestTimeout: .seconds(10))
        #expect((0...5).map { policy.requestTimeout(afterAttempts: $0) } == [.seconds(10), .seconds(20), .seconds(40), .seconds(60), .seconds(60), .seconds(60)])
        let bounded = DeliveryPolicy(requestTimeout: .seconds(2), maximumRequestTimeout: .seconds(5))
        #expect((0...3).map { bounded.requestTimeout(afterAttempts: $0) } == [.seconds(2), .seconds(4), .seconds(5), .seconds(5)])
        // A bound below the first timeout is the first timeout: no POST waits less than asked.
        #expect(DeliveryPolicy(requestTimeout: .seconds(10), maximumRequestTimeout: .seconds(1)).requestTimeout(afterAttempts: 3) == .seconds(10))
        #expect(policy.requestTimeout(afterAttempts: 1_000) == .seconds(60))
    }
}
