import Foundation
import RevenueMetrics
import Testing

@Suite("Revenue metrics' values: durations, rates and totals")
struct RevenueMetricsValuesTests {
    @Test func aProductDurationIsOneISO8601UnitOfDaysWeeksMonthsOrYears() {
        #expect(ProductDuration("P1M") == ProductDuration("P1M") && ProductDuration("P1M")?.description == "P1M")
        #expect(ProductDuration("P3D")?.unit == .day && ProductDuration("P2W")?.count == 2 && ProductDuration("P1Y")?.unit == .year)
        for bad in ["", "P", "1M", "PM", "P0M", "P01M", "P1H", "P1M2D", "PT1M", "p1m", "P1000Y", "P-1M", "P1.5M"] {
            #expect(ProductDuration(bad) == nil, "\(bad)")
        }
    }

    @Test func ratesNameTheirTargetAndEveryLineAndARateMissingIsFound() throws {
        let rates = try ExchangeRates(csv: "currency,USD\nEUR,1.08\n# a comment\nGBP, 1.27\n")
        #expect(rates.target == "USD" && rates.rates == ["USD": 1, "EUR": Decimal(string: "1.08")!, "GBP": Decimal(string: "1.27")!])
        let rows = ["USD", "JPY", "EUR"].map { MetricsRow(bundleId: "b", environment: "Production", intervalStart: .distantPast, intervalEnd: .distantFuture, currency: $0) }
        #expect(rates.missing(in: rows) == ["JPY"])
        #expect(throws: ExchangeRates.Problem(description: "line 3: expected `CUR,rate` (a code such as EUR, a positive decimal rate), not 'GBP,-1'")) {
            try ExchangeRates(csv: "currency,USD\nEUR,1.08\nGBP,-1")
        }
        #expect(throws: ExchangeRates.Problem.self) { try ExchangeRates(csv: "cur,USD\n") }
        #expect(throws: ExchangeRates.Problem.self) { try ExchangeRates(csv: "") }
    }

    @Test func aTotalAddsCountsAndConvertsAmountsToTheMilliunitPerAppStoreAndInterval() throws {
        let rates = try ExchangeRates(csv: "currency,USD\nEUR,1.5\n")
        let start = Date(timeIntervalSince1970: 1_800_000_000), end = start.addingTimeInterval(86_400)
        var usd = MetricsRow(bundleId: "b", environment: "Production", intervalStart: start, intervalEnd: end, currency: "USD")
        usd.activeSubscriptions = 2
        usd.mrr = 9_980
        usd.gross = 4_990
        var eur = MetricsRow(bundleId: "b", environment: "Production", intervalStart: start, intervalEnd: end, currency: "EUR")
        eur.activeSubscriptions = 1
        eur.mrr = 3_333
        eur.refundAmount = 1
        eur.trialsEnded = 2
        eur.trialsEndedConverted = 1
        let other = MetricsRow(bundleId: "b", environment: "Sandbox", intervalStart: start, intervalEnd: end, currency: "USD")
        let totals = rates.totals(of: [usd, eur, other])
        #expect(totals.count == 2 && totals.allSatisfy { $0.isTotal && $0.currency == "USD" })
        let production = try #require(totals.first { $0.environment == "Production" })
        #expect(production.activeSubscriptions == 3 && production.mrr == 9_980 + 5_000 && production.gross == 4_990)
        #expect(production.refundAmount == 2, "1.5 milliunits rounds to 2")
        #expect(production.trialConversionRate == 0.5 && production.net == 4_988 && production.arr == 14_980 * 12)
    }
}
