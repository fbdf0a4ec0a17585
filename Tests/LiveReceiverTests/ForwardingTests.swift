import AppStoreSimulator
@testable import Decisions
import Foundation
import LiveReceiver
import Ledger
import PostgresNIO
import Reconciliation
import TestSupport
import Testing

/// `serve --forward-to`'s sender against handlers that are slow or never answer (issue 31,
/// point 5): every notification gets its turn, none is sent more than the attempt limit, and
/// what the handler keeps refusing is parked as failed, not retried for ever.
@Suite("Forwarding to a slow or silent handler")
struct ForwardingTests {
    /// Five notifications recorded by serve's path, queued for `handler`; the forwarder runs
    /// while `body` does.
    static func withForwarder(
        _ receiver: WebhookReceiver, policy: DeliveryPolicy, seed: UInt64,
        _ body: @Sendable (_ uuids: [String], _ store: LedgerStore, _ target: DeliveryTarget, _ client: PostgresClient) async throws -> Void
    ) async throws {
        let harness = try RecoveryHarness(customers: 10, seed: seed)
        let notifications = Array(harness.scenario.notifications.prefix(5))
        let signed = try notifications.map { try harness.api.signNotification($0) }
        try await receiver.withRunning { handler in
            try await TestDatabase.withFreshLedger { client, _ in
                let store = LedgerStore(client: client, logger: harness.logger)
                let target = try DeliveryTarget(handler)
                let ingest = NotificationIngest(verifier: try harness.verifier(), store: store, deliverTo: target.key)
                #expect(try await ingest.ingest(signedPayloads: signed) == 5)
                let forwarder = NotificationForwarder(store: store, target: target, policy: policy, logger: harness.logger)
                let running = Task { try await forwarder.run() }
                defer { running.cancel() }
                try await body(notifications.map { $0.uuid.lowercased() }, store, target, client)
                forwarder.redelivery.stop.request()
                _ = try? await running.value
            }
        }
    }

    /// The attempts and parking of each delivery, by notificationUUID.
    static func deliveries(_ client: PostgresClient) async throws -> [String: (attempts: Int, failed: Bool)] {
        var found: [String: (attempts: Int, failed: Bool)] = [:]
        for try await (uuid, attempts, failed) in try await client.query(
            "SELECT notification_uuid::text, attempts, failed_at IS NOT NULL FROM app_store.deliveries", logger: TestDatabase.logger
        ).decode((String, Int, Bool).self) {
            found[uuid] = (attempts, failed)
        }
        return found
    }

    /// A handler that answers only after 12 s, past the 10 s timeout, four POSTs at once (issue
    /// 48, point 8): each later POST of a notification may wait twice as long as the one before,
    /// so the second POST waits for the handler's answer. Within 100 s every notification is
    /// delivered, and none reaches the handler more than four times (with a fixed timeout: about
    /// six times each in 100 s, every copy processed by the handler). The fifth notification's
    /// first POST comes before any notification's second (fewest attempts first). (Real seconds:
    /// the POST's timeout is the HTTP client's and the due times are PostgreSQL's `now()`; no
    /// injected clock reaches either.)
    @Test func aHandlerAnsweringAfter12sGetsEachNotificationAtMostFourTimesIn100sAndEveryOneDelivered() async throws {
        let receiver = WebhookReceiver(latency: .seconds(12))
        let policy = DeliveryPolicy(requestTimeout: .seconds(10), concurrency: 4)
        try await Self.withForwarder(receiver, policy: policy, seed: 331) { uuids, store, target, client in
            let started = Date()
            var delivered = 0
            // A wait, not a bound on the machine: under the whole suite on two cores one first
            // arrival once came after 60 s.
            while delivered < 5, Date().timeIntervalSince(started) < 150 {
                delivered = try await Self.deliveredCount(client)
                try await Task.sleep(for: .milliseconds(250))
            }
            let attempts = try await Self.deliveries(client).values.map(\.attempts)
            #expect(delivered == 5, "every notification delivered: \(attempts)")
            let copiesIn100s = Dictionary(grouping: receiver.received.filter { $0.at.timeIntervalSince(started) <= 100 }.compactMap(\.notificationUUID), by: { $0 })
                .mapValues(\.count)
            #expect(Set(copiesIn100s.keys) == Set(uuids), "every notification reached the handler")
            #expect(copiesIn100s.values.allSatisfy { $0 <= 4 }, "at most four copies each in 100 s: \(copiesIn100s.values.sorted())")
            var attemptsSoFar: [String: Int] = [:]
            var lastFirstPost: Int?
            var firstSecondPost: Int?
            for request in receiver.received.sorted(by: { $0.index < $1.index }) {
                guard let uuid = request.notificationUUID else { continue }
                attemptsSoFar[uuid, default: 0] += 1
                if attemptsSoFar[uuid] == 1 { lastFirstPost = request.index }
                if attemptsSoFar[uuid] == 2, firstSecondPost == nil { firstSecondPost = request.index }
            }
            #expect(
                lastFirstPost != nil && firstSecondPost != nil && lastFirstPost! < firstSecondPost!,
                "every first POST before any second: \(String(describing: lastFirstPost)), \(String(describing: firstSecondPost))")
            #expect(try await store.nextDeliveryDue(to: target.key) == nil)
            #expect(try await store.deliveryQueue(to: target.key, dueOnly: false).isEmpty)
        }
    }

    static func deliveredCount(_ client: PostgresClient) async throws -> Int {
        for try await count in try await client.query(
            "SELECT count(*)::int FROM app_store.deliveries WHERE delivered_at IS NOT NULL", logger: TestDatabase.logger
        ).decode(Int.self) {
            return count
        }
        return 0
    }

    /// A handler that never answers (2 s timeout, at most 3 attempts): each notification ends
    /// parked after exactly 3 attempts, the handler saw each 3 times, the counts say so (serve's
    /// failed-forwards metric), and `deliver --retry-failed`'s un-parking sends them again.
    @Test func aHandlerThatNeverAnswersEndsWithEachNotificationFailedAfterItsAttempts() async throws {
        let receiver = WebhookReceiver(latency: .seconds(3_600))
        // Each POST 2 s, the later ones too: this proves the parking, not the timeout's growth.
        let policy = DeliveryPolicy(requestTimeout: .seconds(2), maximumAttempts: 3, concurrency: 2, maximumRequestTimeout: .seconds(2))
        try await Self.withForwarder(receiver, policy: policy, seed: 332) { uuids, store, target, client in
            var counts = DeliveryCounts()
            let deadline = Date().addingTimeInterval(120)
            while counts.failed < 5, Date() < deadline {
                counts = try await store.deliveryCounts(to: target.key)
                try await Task.sleep(for: .milliseconds(250))
            }
            #expect(counts == DeliveryCounts(pending: 0, failed: 5))
            let rows = try await Self.deliveries(client)
            #expect(Set(rows.keys) == Set(uuids) && rows.values.allSatisfy { $0.attempts == 3 && $0.failed })
            let perNotification = Dictionary(grouping: receiver.received.compactMap(\.notificationUUID), by: { $0 }).mapValues(\.count)
            #expect(Set(perNotification.keys) == Set(uuids) && perNotification.values.allSatisfy { $0 == 3 }, "\(perNotification.values.sorted())")
            let listing = try await store.deliveryListing(to: target.key)
            #expect(listing.count == 5 && listing.allSatisfy { $0.failed && $0.lastError == "no answer: timed out" })

            #expect(try await store.retryFailedDeliveries(to: target.key) == 5)
            #expect(try await store.deliveryCounts(to: target.key) == DeliveryCounts(pending: 5, failed: 0))
        }
    }
}
