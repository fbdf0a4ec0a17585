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

    /// Apple's example (App Store Connect API, "List all price points for a subscription": USA,
    /// customerPrice 0.29, proceeds 0.21, proceedsYear2 0.25) reads as milliunits.
    @Test func pricePointsReadAppStoreConnectsAmountsAsMilliunitsAndNameTheLineOfAProblem() throws {
        let header = PricePoints.header
        let points = try PricePoints(csv: "\(header)\r\ncom.example.monthly,USA,0.29,0.21,0.25\n# a comment\n\ncom.example.monthly, CAN ,4.99,3.4,4.245\ncom.example.monthly,USA,0.29,0.21,0.25\n")
        #expect(points.points == [
            .init(productId: "com.example.monthly", territory: "USA", customerPrice: 290, proceeds: 210, proceedsYear2: 250),
            .init(productId: "com.example.monthly", territory: "CAN", customerPrice: 4990, proceeds: 3400, proceedsYear2: 4245),
        ], "a point given twice alike is one point")
        #expect(throws: PricePoints.Problem(description: "line 3: com.example.monthly USA at 0.29 is given again with other proceeds")) {
            try PricePoints(csv: "\(header)\ncom.example.monthly,USA,0.29,0.21,0.25\ncom.example.monthly,USA,0.29,0.20,0.25\n")
        }
        for bad in ["p,US,0.29,0.21,0.25", "p,USA,0,0,0", "p,USA,0.29,0.30,0.25", "p,USA,0.29,0.21", "p,USA,1e3,1,1", "p,USA,-1,0,0", "p,USA,0.2999,0.2,0.2", ",USA,1,1,1", "p,USA,1.,1,1"] {
            #expect(throws: PricePoints.Problem.self, "\(bad)") { try PricePoints(csv: "\(header)\n\(bad)\n") }
        }
        #expect(throws: PricePoints.Problem(description: "line 1: expected the header `\(header)`")) { try PricePoints(csv: "product,territory\n") }
        #expect(throws: PricePoints.Problem.self) { try PricePoints(csv: "# nothing\n") }
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
