import AppStoreServerAPI
import AppStoreSimulator
import Foundation
import SignedData
import Testing

/// Send Consumption Information v2 through the client against the simulator, which takes an
/// answer as Apple documents (202, no body) and refuses what Apple refuses.
@Suite struct ConsumptionInformationTests {
    static let answer = ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 25_000, refundPreference: .decline)

    /// A consumable's transaction ID and an auto-renewable one's.
    static func transactions(_ harness: SimulatorHarness) throws -> (consumable: String, subscription: String) {
        let versions = harness.scenario.customers.flatMap(\.transactionVersions).map(\.transaction)
        let consumable = try #require(versions.first { $0.type == .consumable && $0.inAppOwnershipType != "FAMILY_SHARED" }?.transactionId)
        let subscription = try #require(versions.first { $0.type == .autoRenewable && $0.inAppOwnershipType != "FAMILY_SHARED" }?.transactionId)
        return (consumable, subscription)
    }

    @Test func anAnswerIsTakenWith202AndNoBody() async throws {
        let harness = try SimulatorHarness(customers: 20)
        let ids = try Self.transactions(harness)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            try await client.sendConsumptionInformation(transactionId: ids.consumable, Self.answer)
            let taken = harness.api.consumptionAnswers
            #expect(taken.count == 1)
            #expect(taken.first?.transactionId == ids.consumable)
            #expect(taken.first?.deliveryStatus == "DELIVERED")
            #expect(taken.first?.consumptionPercentage == 25_000)
            #expect(taken.first?.refundPreference == "DECLINE")
            #expect(client.counts.requests[.sendConsumptionInformation] == 1)
        }
    }

    @Test func whatAppleRefusesIsAnErrorNeverSentAgain() async throws {
        let harness = try SimulatorHarness(customers: 20)
        let ids = try Self.transactions(harness)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            let refusals: [(String, ConsumptionInformation, Int64)] = [
                (ids.consumable, ConsumptionInformation(customerConsented: false, deliveryStatus: .delivered, sampleContentProvided: false), 4_000_035),
                (ids.consumable, ConsumptionInformation(customerConsented: true, deliveryStatus: "SHIPPED", sampleContentProvided: false), 4_000_036),
                (ids.subscription, ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 10), 4_000_209),
                ("99999999999999999", Self.answer, 4_040_010),
            ]
            for (id, body, code) in refusals {
                do {
                    try await client.sendConsumptionInformation(transactionId: id, body)
                    Issue.record("Apple took \(body) for \(id)")
                } catch let error as AppStoreAPIError {
                    #expect(error.code?.rawValue == code)
                }
            }
            #expect(harness.api.consumptionAnswers.isEmpty)
            #expect(harness.api.requestCounts["sendConsumptionInformation"] == refusals.count, "each sent once")
        }
    }

    @Test func aRetryableErrorThenAnAnswerTakenIsOneAnswer() async throws {
        let harness = try SimulatorHarness(customers: 20)
        let ids = try Self.transactions(harness)
        try await SimulatorServer.withRunning(harness.api) { baseURL in
            let client = try harness.client(baseURL: baseURL)
            harness.api.inject([.error(status: 500, errorCode: 5_000_001, message: "An unknown error occurred. Please try again.")])
            try await client.sendConsumptionInformation(transactionId: ids.consumable, Self.answer)
            #expect(harness.api.requestCounts["sendConsumptionInformation"] == 2)
            #expect(harness.api.consumptionAnswers.count == 1)
        }
    }

    @Test func theBodyCarriesOnlyTheOptionalsGiven() throws {
        let bare = ConsumptionInformation(customerConsented: true, deliveryStatus: .undeliveredServerOutage, sampleContentProvided: true)
        let text = String(decoding: try JSONEncoder().encode(bare), as: UTF8.self)
        #expect(!text.contains("consumptionPercentage"))
        #expect(!text.contains("refundPreference"))
        #expect(text.contains("\"deliveryStatus\":\"UNDELIVERED_SERVER_OUTAGE\""))
    }
}
