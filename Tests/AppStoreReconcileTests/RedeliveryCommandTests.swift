import AppStoreSimulator
@testable import Decisions
import Foundation
import PostgresNIO
import Reconciliation
import TestSupport
import Testing
import ThrowawayPostgres

@Suite("re-delivery on the command line")
struct RedeliveryCommandTests {
    static func uuids(_ client: PostgresClient, _ sql: String) async throws -> Set<String> {
        var found: Set<String> = []
        for try await uuid in try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger).decode(String.self) { found.insert(uuid) }
        return found
    }

    @Test func aRunKilledDuringDeliveryLosesNoneAndItsRerunResendsNoneAfterItsRecorded2xx() async throws {
        let harness = try RecoveryHarness(customers: 80, seed: 74, outageHours: 30)
        let receiver = WebhookReceiver(latency: .milliseconds(30))
        try await RunCommandTests.withSetup(harness) { environment, client, scratch in
            try await receiver.withRunning { handler in
                var environment = environment
                environment["APPSTORE_DELIVER_TO"] = handler
                let arguments = ["run"] + RunCommandTests.window(harness) + ["--report-dir", scratch.path + "/r", "--no-progress"]
                let run = try BuiltBinary.start(arguments, environment: environment)
                let deadline = Date().addingTimeInterval(180)
                while receiver.received.count < 8 && Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
                run.send(SIGKILL)
                _ = await run.waitAsync()
                let boundary = receiver.received.count
                #expect(boundary >= 8, "killed during delivery")

                let recovered = try await Self.uuids(client, "SELECT notification_uuid::text FROM app_store.notifications WHERE source = 'history'")
                let queued = try await Self.uuids(client, "SELECT notification_uuid::text FROM app_store.deliveries")
                let deliveredBefore = try await Self.uuids(client, "SELECT notification_uuid::text FROM app_store.deliveries WHERE delivered_at IS NOT NULL")
                #expect(queued == recovered && recovered.count > 20, "every recovered notification was queued with it: none lost")
                #expect(!deliveredBefore.isEmpty && deliveredBefore.count < queued.count, "the kill came midway: \(deliveredBefore.count) of \(queued.count)")

                // Output names a handler by scheme, host and port only.
                let shown = try DeliveryTarget(handler).description
                #expect(shown.hasSuffix("/…") && !shown.contains("/apple/notifications"))
                print("re-delivery: killed after \(boundary) POSTs, \(deliveredBefore.count) of \(queued.count) recorded delivered")
                let listed = try await BuiltBinary.run(["deliver", "--to", handler, "--dry-run"], environment: environment)
                #expect(listed.exitCode == 0 && listed.standardOutput.contains("Pending for \(shown): \(queued.count - deliveredBefore.count) notification(s)"), "\(listed.combined)")

                let rerun = try await BuiltBinary.run(arguments, environment: environment)
                #expect(rerun.exitCode == 0, "\(rerun.combined)")
                #expect(rerun.standardOutput.contains("re-delivery to \(shown): \(queued.count - deliveredBefore.count) delivered, 0 failed, 0 pending"), "\(rerun.standardOutput)")
                let received = receiver.received
                let afterKill = received.filter { $0.index >= boundary }
                #expect(afterKill.allSatisfy { !deliveredBefore.contains($0.notificationUUID ?? "") }, "nothing re-sent after its recorded 2xx")
                #expect(try await Self.uuids(client, "SELECT notification_uuid::text FROM app_store.deliveries WHERE delivered_at IS NULL").isEmpty)
                #expect(Set(received.compactMap(\.notificationUUID)) == queued, "every one delivered")
                // At most one notification (the POST in flight at the kill) reached the handler twice.
                let twice = Dictionary(grouping: received.compactMap(\.notificationUUID), by: { $0 }).filter { $0.value.count > 1 }
                #expect(twice.count <= 1, "\(twice.keys.sorted())")

                let nothingLeft = try await BuiltBinary.run(["deliver", "--to", handler], environment: environment)
                #expect(nothingLeft.exitCode == 0 && nothingLeft.standardOutput.contains("Delivered 0"), "\(nothingLeft.combined)")
                #expect(try await BuiltBinary.run(["deliver", "--to", "http://handler.example.com/x"], environment: environment).exitCode == 64)
            }
        }
    }
}
