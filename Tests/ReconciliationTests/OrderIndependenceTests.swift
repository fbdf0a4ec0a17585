import AppStoreSimulator
import Foundation
import Ledger
import PostgresNIO
import Reconciliation
import TestSupport
import Testing

@Suite("Property: any order, any number of times")
struct OrderIndependenceTests {
    /// Applies payloads through the live path (ingest), in batches of the given sizes, and dumps the ledger.
    static func ledger(after batches: [[String]], harness: RecoveryHarness) async throws -> [String] {
        try await TestDatabase.withFreshLedger { client, _ in
            let ingest = NotificationIngest(verifier: try harness.verifier(), store: LedgerStore(client: client, logger: harness.logger))
            for batch in batches { _ = try await ingest.ingest(signedPayloads: batch) }
            return try await RecoveryHarness.dump(client)
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5])
    func applyingAScenarioInAnyOrderAnyNumberOfTimesLeavesTheLedgerOfApplyingItOnceInSignedDateOrder(seed: UInt64) async throws {
        let harness = try RecoveryHarness(customers: 25, seed: 180 + seed)
        let notifications = harness.scenario.notifications.sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        let signed = try notifications.map { try harness.api.signNotification($0) }
        let inOrder = try await Self.ledger(after: stride(from: 0, to: signed.count, by: 20).map { Array(signed[$0..<min($0 + 20, signed.count)]) }, harness: harness)

        var random = SeededGenerator(seed: seed)
        // Each notification one to three times, all shuffled, in batches of 1 to 30.
        var stream = signed.flatMap { payload in Array(repeating: payload, count: Int.random(in: 1...3, using: &random)) }
        stream.shuffle(using: &random)
        var batches: [[String]] = []
        while !stream.isEmpty {
            let size = min(stream.count, Int.random(in: 1...30, using: &random))
            batches.append(Array(stream.prefix(size)))
            stream.removeFirst(size)
        }
        let shuffled = try await Self.ledger(after: batches, harness: harness)
        #expect(shuffled.count == inOrder.count)
        #expect(shuffled == inOrder, "seed \(seed): \(Set(shuffled).symmetricDifference(inOrder).sorted().prefix(6))")
    }
}
