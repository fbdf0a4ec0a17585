import AppStoreSimulator
@testable import Decisions
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import SignedData
import TestSupport
import Testing

@Suite("Recording verified notifications together (serve's batches)")
struct IngestVerifiedTests {
    enum Expected: Equatable { case recorded, duplicate, rejected }

    static func kind(_ outcome: NotificationIngest.Outcome) -> Expected? {
        switch outcome {
        case .recorded: .recorded
        case .duplicate: .duplicate
        case .rejected: .rejected
        case .retryLater: nil
        }
    }

    /// A batch in no particular order, mixing new notifications, ones already in the ledger, one
    /// sent twice in the batch, a tampered one and one that is not a JWS: each request gets the
    /// outcome of its own payload (a shuffled mapping would answer Apple 200 for a notification
    /// that was rejected, or 400 for one that was recorded).
    @Test(arguments: [1, 2, 3])
    func eachPayloadOfABatchGetsItsOwnOutcomeWhateverTheOrder(seed: UInt64) async throws {
        let harness = try RecoveryHarness(customers: 12, seed: 190 + seed)
        let signed = try harness.scenario.notifications.map { try harness.api.signNotification($0) }
        try #require(signed.count >= 30)
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            _ = try await ingest.ingest(signedPayloads: Array(signed[0..<5]))

            var tampered = signed[20]
            let index = tampered.index(tampered.endIndex, offsetBy: -6)
            tampered.replaceSubrange(index...index, with: tampered[index] == "A" ? "B" : "A")
            var batch: [(payload: String, expected: Expected)] = signed[5..<20].map { ($0, .recorded) }
            batch += signed[1..<4].map { ($0, .duplicate) }
            batch.append((tampered, .rejected))
            batch.append(("not a JWS", .rejected))
            batch.append((signed[8], .duplicate))  // the same as an earlier one of this batch
            var random = SeededGenerator(seed: seed)
            batch.shuffle(using: &random)
            // Of the two copies of signed[8], the one first in the batch is recorded.
            let copies = batch.indices.filter { batch[$0].payload == signed[8] }
            batch[copies[0]].expected = .recorded
            batch[copies[1]].expected = .duplicate

            var inputs: [RecoveryPlanner.Input] = []
            for entry in batch { inputs.append(await ingest.verify(entry.payload)) }
            let outcomes = try await ingest.ingest(verified: inputs)
            #expect(outcomes.count == batch.count)
            let got = outcomes.map(Self.kind)
            let want = batch.map(\.expected)
            #expect(got == want.map { Optional($0) }, "seed \(seed)")

            // And the ledger agrees: every payload answered recorded is in it, nothing else new.
            var stored: Set<String> = []
            for try await uuid in try await client.query("SELECT notification_uuid::text FROM app_store.notifications", logger: harness.logger).decode(String.self) {
                stored.insert(uuid)
            }
            let uuids = signed.map { UnverifiedPayload.notificationUUID(of: $0)?.lowercased() }
            let expectedStored = Set((uuids[0..<5] + uuids[5..<20]).compactMap { $0 })
            #expect(stored == expectedStored)
        }
    }
}
