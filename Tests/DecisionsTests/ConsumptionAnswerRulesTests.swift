import AppStoreServerModel
import Decisions
import Foundation
import LedgerModel
import RemedyDecisions
import SignedData
import Testing

/// The team's facts checked against Apple's rules for Send Consumption Information v2 before
/// anything is sent (endpoints-that-change §2), without I/O.
@Suite struct ConsumptionAnswerRulesTests {
    static let consumable = ProductType.consumable
    static let subscription = ProductType.autoRenewable

    static func facts(
        consented: Bool? = true, delivery: String? = "DELIVERED", sample: Bool? = false, percentage: Int64? = nil, preference: String? = nil
    ) -> ConsumptionFacts {
        ConsumptionFacts(customerConsented: consented, deliveryStatus: delivery, sampleContentProvided: sample, consumptionPercentage: percentage, refundPreference: preference)
    }

    @Test func completeFactsAreSentWithOnlyTheOptionalsGiven() {
        let answer = ConsumptionAnswerRules.answer(rows: [Self.facts(percentage: 40_000, preference: "DECLINE")], productType: Self.consumable)
        #expect(answer == .send(ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false, consumptionPercentage: 40_000, refundPreference: .decline)))
        #expect(answer.outcome == "sent")
        let bare = ConsumptionAnswerRules.answer(rows: [Self.facts(sample: true)], productType: Self.subscription)
        #expect(bare == .send(ConsumptionInformation(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: true)))
    }

    @Test func noRowIsNoFactsAndNoConsentIsNeverSent() {
        #expect(ConsumptionAnswerRules.answer(rows: [], productType: Self.consumable) == .noFacts)
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(consented: false)], productType: Self.consumable) == .noConsent)
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(consented: nil)], productType: Self.consumable) == .noConsent)
    }

    @Test(arguments: [
        (facts(delivery: "SHIPPED"), consumable, "delivery_status"),
        (facts(delivery: nil), consumable, "delivery_status"),
        (facts(sample: nil), consumable, "sample_content_provided"),
        (facts(preference: "REFUND_HALF"), consumable, "refund_preference"),
        (facts(percentage: 100_001), consumable, "consumption_percentage"),
        (facts(percentage: -1), consumable, "consumption_percentage"),
        (facts(percentage: 50_000), subscription, "consumption_percentage"),
        (facts(delivery: "UNDELIVERED_SERVER_OUTAGE", percentage: 10), consumable, "consumption_percentage"),
        (facts(preference: "GRANT_PRORATED"), consumable, "consumption_percentage"),
        (facts(percentage: 100_000, preference: "GRANT_PRORATED"), consumable, "consumption_percentage"),
        (facts(percentage: 0, preference: "GRANT_PRORATED"), consumable, "consumption_percentage"),
    ])
    func aValueAppleRefusesIsInvalidNamingItsColumn(facts: ConsumptionFacts, type: ProductType, column: String) {
        guard case .invalid(let field, let reason) = ConsumptionAnswerRules.answer(rows: [facts], productType: type) else {
            Issue.record("\(facts) would be sent")
            return
        }
        #expect(field == column, "\(reason)")
    }

    @Test func whatAppleAcceptsAtTheEdgesIsSent() {
        // 0 for an undelivered purchase; GRANT_PRORATED strictly inside; an auto-renewable one prorated without a percentage.
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(delivery: "UNDELIVERED_OTHER", percentage: 0)], productType: Self.consumable).outcome == "sent")
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(percentage: 1, preference: "GRANT_PRORATED")], productType: Self.consumable).outcome == "sent")
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(percentage: 99_999, preference: "GRANT_PRORATED")], productType: Self.consumable).outcome == "sent")
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(preference: "GRANT_PRORATED")], productType: Self.subscription).outcome == "sent")
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(percentage: 100_000)], productType: Self.consumable).outcome == "sent")
    }

    @Test func twoRowsOrAPercentageForAnUnknownProductAreInvalid() {
        #expect(ConsumptionAnswerRules.answer(rows: [Self.facts(), Self.facts()], productType: Self.consumable) == .invalid(field: "rows", reason: "the facts query returned 2 rows for one request; it must return one at most"))
        guard case .invalid(let field, _) = ConsumptionAnswerRules.answer(rows: [Self.facts(percentage: 10)], productType: nil) else {
            Issue.record("a percentage sent for a product of unknown type")
            return
        }
        #expect(field == "consumption_percentage")
    }
}

/// Issue 62, point 5: an episode is answerable until 12 hours after its latest request.
@Suite("A refund request's deadline")
struct ConsumptionDeadlineTests {
    @Test func anEpisodesDeadlineIsTwelveHoursAfterItsLatestRequestWhateverItsFirst() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let first = now.addingTimeInterval(-20 * 3600)
        let repeated = now.addingTimeInterval(-2 * 3600)
        #expect(ConsumptionDeadline.episodeDeadline(requestsSent: [first, repeated]) == now.addingTimeInterval(10 * 3600))
        #expect(ConsumptionDeadline.episodeDeadline(requestsSent: [repeated, first]) == now.addingTimeInterval(10 * 3600))
        #expect(ConsumptionDeadline.episodeDeadline(requestsSent: [first]) == now.addingTimeInterval(-8 * 3600))
        #expect(ConsumptionDeadline.episodeDeadline(requestsSent: []) == nil)
    }
}
