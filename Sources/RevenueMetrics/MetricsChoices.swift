package import Foundation

/// The length of one row's interval. Intervals start at 00:00 UTC; weeks on Monday.
package enum MetricsInterval: String, Sendable, CaseIterable {
    case day, week, month

    /// How far back `metrics` looks without `--from`: 30 days, 12 weeks, 12 months before `--to`.
    package func defaultFrom(to: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        switch self {
        case .day: return calendar.date(byAdding: .day, value: -30, to: to)!
        case .week: return calendar.date(byAdding: .day, value: -84, to: to)!
        case .month: return calendar.date(byAdding: .month, value: -12, to: to)!
        }
    }
}

/// How a period's price becomes a month's (MRR): `exact`, price × (365.25 / 12) / period_days;
/// `revenuecat`, RevenueCat's published factors (a day ×30, a week ×4, a month ×1, a year ÷12).
package enum MRRConvention: String, Sendable, CaseIterable {
    case exact, revenuecat
}

/// Where a refund is counted: at the refund's date (`refund-date`), or at the start of the
/// period it refunded (`at-purchase`, which restates past intervals).
package enum RefundPlacement: String, Sendable, CaseIterable {
    case refundDate = "refund-date"
    case atPurchase = "at-purchase"
}

/// Whether billing grace time is access: `active`, until the grace period ends (Apple keeps the
/// customer's access then); `lapsed`, the access ends at the expiry.
package enum GracePeriodChoice: String, Sendable, CaseIterable {
    case active, lapsed
}

/// The choices the numbers depend on, named in every output.
package struct MetricsChoices: Sendable, Equatable {
    package var interval: MetricsInterval
    package var convention: MRRConvention
    package var refunds: RefundPlacement
    /// Apple's Small Business Program: 85% proceeds from the first year.
    package var smallBusinessProgram: Bool
    package var gracePeriod: GracePeriodChoice

    package init(
        interval: MetricsInterval = .day, convention: MRRConvention = .exact, refunds: RefundPlacement = .refundDate, smallBusinessProgram: Bool = false,
        gracePeriod: GracePeriodChoice = .active
    ) {
        self.interval = interval
        self.convention = convention
        self.refunds = refunds
        self.smallBusinessProgram = smallBusinessProgram
        self.gracePeriod = gracePeriod
    }
}

/// A product's standard duration as the configuration's `products` gives it: ISO 8601, one
/// number (1 to 999) and one unit of days, weeks, months or years (P3D, P1W, P1M, P6M, P1Y): the
/// durations App Store Connect offers.
package struct ProductDuration: Sendable, Hashable, CustomStringConvertible {
    package enum Unit: Character, Sendable, Hashable { case day = "D", week = "W", month = "M", year = "Y" }
    package var count: Int
    package var unit: Unit

    package init?(_ text: String) {
        guard text.count >= 3, text.first == "P", let last = text.last, let unit = Unit(rawValue: last) else { return nil }
        let digits = text.dropFirst().dropLast()
        guard digits.allSatisfy({ $0.isASCII && $0.isNumber }), digits.first != "0", let count = Int(digits), (1...999).contains(count) else {
            return nil
        }
        self.count = count
        self.unit = unit
    }

    package var description: String { "P\(count)\(unit.rawValue)" }
}
