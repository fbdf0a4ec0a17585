import AppStoreSimulator
import Foundation
import PostgresNIO
import SignedData
import TestSupport
import Testing
import ThrowawayPostgres

/// Issue 62, point 6: a verified notification of a shape this release does not know (Apple's
/// UNCLAIM_SEATS carries `unclaimInfo` in place of `data`) is recorded, attributed by what it
/// carries, and changes nothing the tool has no policy for; one that names no app, or another
/// app, is still rejected. Through the built binary and real PostgreSQL.
@Suite("Notifications of a shape this release does not know")
struct UnknownShapeTests {
    /// A notification with `part` (a JSON object's text) under `name` in place of `data`, signed by
    /// `harness`'s App Store at `signedDate`.
    static func signed(_ harness: RecoveryHarness, type: String, uuid: String, signedDate: Int64, part name: String, _ part: String) throws -> String {
        let json = """
            {"notificationType":"\(type)","notificationUUID":"\(uuid)","version":"2.0","signedDate":\(signedDate),"\(name)":\(part)}
            """
        return try harness.api.pki.signer().sign(json: Array(json.utf8))
    }

    static func rows(_ client: PostgresClient, _ sql: String) async throws -> [String] {
        var rows: [String] = []
        for try await row in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(String.self) { rows.append(row) }
        return rows
    }

    @Test func anUnclaimSeatsNotificationIsRecordedForItsSubscriptionAndChangesNothingElse() async throws {
        let harness = try RecoveryHarness(customers: 4, seed: 6206)
        let configuration = harness.scenario.configuration
        let delivered = harness.scenario.deliveredNotifications[0]
        let original = try #require(delivered.transaction.originalTransactionId)
        let appAppleId = configuration.environment == .production ? "\"appAppleId\":\(configuration.appAppleId)," : ""
        let identity = "\(appAppleId)\"bundleId\":\"\(configuration.bundleId)\",\"environment\":\"\(configuration.environment.rawValue)\""
        let uuid = "0c7e1b2a-6d5f-4e3a-9b8c-7d6e5f4a3b2c"
        let unclaim = try Self.signed(
            harness, type: NotificationType.unclaimSeats.rawValue, uuid: uuid, signedDate: delivered.signedDate, part: "unclaimInfo",
            "{\(identity),\"originalTransactionId\":\"\(original)\",\"unclaimSeatIds\":[\"8f7e6d5c-4b3a-4291-8807-1a2b3c4d5e6f\"]}")
        try await RunCommandTests.withSetup(harness) { environment, client, _ in
            let subscriptionsBefore = try await Self.rows(client, "SELECT md5(string_agg(s::text, ',' ORDER BY original_transaction_id)) FROM app_store.subscriptions s")
            let changesBefore = try await Self.rows(client, "SELECT count(*)::text FROM app_store.changes")

            let recorded = try await BuiltBinary.run(["ingest", "-"], environment: environment, standardInput: "{\"signedPayload\":\"\(unclaim)\"}")
            #expect(recorded.exitCode == 0, "\(recorded.combined)")
            let row = try await Self.rows(client, """
                SELECT notification_type || ' ' || bundle_id || ' ' || environment || ' ' || coalesce(original_transaction_id, '-')
                FROM app_store.notifications WHERE notification_uuid = '\(uuid)'
                """)
            #expect(row == ["UNCLAIM_SEATS \(configuration.bundleId) \(configuration.environment.rawValue) \(original)"])
            // Queryable: the seats Apple names are in the stored payload.
            let seats = try await Self.rows(client, """
                SELECT app_store.jws_payload(signed_payload) -> 'unclaimInfo' ->> 'unclaimSeatIds'
                FROM app_store.notifications WHERE notification_uuid = '\(uuid)'
                """)
            #expect(seats == ["[\"8f7e6d5c-4b3a-4291-8807-1a2b3c4d5e6f\"]"])
            #expect(try await Self.rows(client, "SELECT md5(string_agg(s::text, ',' ORDER BY original_transaction_id)) FROM app_store.subscriptions s") == subscriptionsBefore)
            #expect(try await Self.rows(client, "SELECT count(*)::text FROM app_store.changes") == changesBefore)
            let again = try await BuiltBinary.run(["ingest", "-"], environment: environment, standardInput: "{\"signedPayload\":\"\(unclaim)\"}")
            #expect(again.exitCode == 4, "already recorded: \(again.combined)")

            // A part naming another app, and a shape naming no app at all: rejected, not recorded.
            let otherApp = try Self.signed(
                harness, type: NotificationType.unclaimSeats.rawValue, uuid: "1d2c3b4a-5f6e-4d7c-8b9a-0f1e2d3c4b5a", signedDate: delivered.signedDate,
                part: "unclaimInfo", "{\(identity.replacingOccurrences(of: configuration.bundleId, with: "com.example.someone-else")),\"unclaimSeatIds\":[]}")
            let wrong = try await BuiltBinary.run(["ingest", "-"], environment: environment, standardInput: "{\"signedPayload\":\"\(otherApp)\"}")
            #expect(wrong.exitCode == 65, "\(wrong.combined)")
            #expect(wrong.standardError.contains("com.example.someone-else"), "\(wrong.standardError)")
            let nobody = try Self.signed(
                harness, type: "SOMETHING_NEW", uuid: "2e3d4c5b-6a7f-4e8d-9c0b-1a2f3e4d5c6b", signedDate: delivered.signedDate,
                part: "seatInfo", "{\"seats\":3}")
            let unnamed = try await BuiltBinary.run(["ingest", "-"], environment: environment, standardInput: "{\"signedPayload\":\"\(nobody)\"}")
            #expect(unnamed.exitCode == 65, "\(unnamed.combined)")
            #expect(unnamed.standardError.contains("names no app"), "\(unnamed.standardError)")
            #expect(try await Self.rows(client, "SELECT count(*)::text FROM app_store.notifications WHERE notification_uuid IN ('1d2c3b4a-5f6e-4d7c-8b9a-0f1e2d3c4b5a', '2e3d4c5b-6a7f-4e8d-9c0b-1a2f3e4d5c6b')") == ["0"])
        }
    }
}
