import AppStoreSimulator
import Foundation
import RevenueMetrics
import SignedData

/// The metrics of a simulated world computed from its ground truth (the simulator's transactions
/// and subscriptions), by the definitions of docs/metrics.md written again in Swift, one period at
/// a time: what app_store.metrics must give over a ledger that holds the same truth.
struct MetricsOracle {
    struct Period {
        var subscription: String
        var transactionId: String
        var productId: String
        var storefront: String
        var currency: String
        var starts: Date
        var ends: Date
        var accessEnds: Date = .distantPast
        var isTrial: Bool
        var price: Int64
        var refundedAt: Date?
        var refundAmount: Int64 = 0
        var reason: String?
        var factor: Double?
    }

    struct Subscription {
        /// The subtypes of the subscription's EXPIRED notifications, by signedDate.
        var expired: [(date: Date, subtype: String?)] = []
        var status: Int?
        var expirationIntent: Int?
        var periods: [Period]
    }

    let bundleId: String
    let environment: String
    var subscriptions: [Subscription] = []

    /// `durations`: each product's duration in days (configured or as its periods give it); a
    /// product without one is unnormalised.
    init(_ scenario: Scenario, durations: [String: (days: Double, unit: Character, count: Int)], convention: MRRConvention, grace: GracePeriodChoice = .active) {
        bundleId = scenario.configuration.bundleId
        environment = scenario.configuration.environment.rawValue
        func date(_ ms: Int64?) -> Date? { ms.map { Date(timeIntervalSince1970: Double($0) / 1000) } }
        for customer in scenario.customers {
            var latest: [String: TransactionPayload] = [:]
            for version in customer.transactionVersions { latest[version.transaction.transactionId!] = version.transaction }
            for purchase in customer.subscriptions {
                guard purchase.latestTransaction.inAppOwnershipType != "FAMILY_SHARED" else { continue }
                let graceEnds = date(purchase.renewalInfo?.gracePeriodExpiresDate)
                var periods: [Period] = []
                for transaction in latest.values where transaction.originalTransactionId == purchase.originalTransactionId {
                    guard transaction.type == .autoRenewable, let starts = date(transaction.purchaseDate), let expires = date(transaction.expiresDate) else { continue }
                    let lastExpiry = date(purchase.latestTransaction.expiresDate)
                    let ends = (graceEnds.map { $0 > expires } ?? false) && expires == lastExpiry ? graceEnds! : expires
                    let revoked = date(transaction.revocationDate)
                    let refund = revoked != nil && transaction.isUpgraded != true
                        && (["REFUND_FULL", "REFUND_PRORATED"].contains(transaction.revocationType ?? "")
                            || (transaction.revocationType == nil && (transaction.inAppOwnershipType ?? "PURCHASED") == "PURCHASED"))
                    let price = transaction.price ?? 0
                    var period = Period(
                        subscription: purchase.originalTransactionId, transactionId: transaction.transactionId!, productId: transaction.productId ?? "",
                        storefront: transaction.storefront ?? "", currency: transaction.currency ?? "", starts: starts, ends: ends, isTrial: transaction.offerDiscountType == "FREE_TRIAL", price: price,
                        refundedAt: refund ? revoked : nil, reason: transaction.transactionReason
                    )
                    let access = grace == .active ? ends : expires
                    period.accessEnds = min(access, revoked ?? access)
                    if refund {
                        period.refundAmount = transaction.revocationType == "REFUND_PRORATED"
                            ? (price * Int64(transaction.revocationPercentage ?? 100_000) + 50_000) / 100_000 : price
                    }
                    if let duration = durations[period.productId] {
                        switch (convention, duration.unit) {
                        case (.revenuecat, "W"): period.factor = 4 / Double(duration.count)
                        case (.revenuecat, "D"): period.factor = 30 / Double(duration.count)
                        default: period.factor = (365.25 / 12) / duration.days
                        }
                    }
                    periods.append(period)
                }
                periods.sort { ($0.starts, $0.transactionId) < ($1.starts, $1.transactionId) }
                for index in periods.indices.dropLast() { periods[index].accessEnds = min(periods[index].accessEnds, periods[index + 1].starts) }
                let expired = scenario.notifications.filter { $0.originalTransactionId == purchase.originalTransactionId && $0.type == .expired }
                    .map { (date: date($0.signedDate)!, subtype: $0.subtype?.rawValue) }.sorted { $0.date < $1.date }
                subscriptions.append(Subscription(expired: expired, status: purchase.subscriptionStatus.map { Int($0.rawValue) }, expirationIntent: purchase.renewalInfo?.expirationIntent, periods: periods))
            }
        }
    }

    static func intervals(from: Date, to: Date, _ interval: MetricsInterval) -> [(Date, Date)] {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var start: Date
        let component: Calendar.Component
        switch interval {
        case .day: start = calendar.startOfDay(for: from); component = .day
        case .week: start = calendar.dateInterval(of: .weekOfYear, for: from)!.start; component = .weekOfYear
        case .month: start = calendar.dateInterval(of: .month, for: from)!.start; component = .month
        }
        var found: [(Date, Date)] = []
        while start < to {
            let end = calendar.date(byAdding: component, value: 1, to: start)!
            found.append((start, end))
            start = end
        }
        return found
    }

    func rows(from: Date, to: Date, choices: MetricsChoices, asOf: Date, pricePoints: PricePoints? = nil) -> [MetricsRow] {
        let intervals = Self.intervals(from: from, to: to, choices.interval)
        let currencies = Set(subscriptions.flatMap { $0.periods.map(\.currency) }).sorted()
        var rows: [MetricsRow] = []
        for (start, end) in intervals {
            for currency in currencies {
                var row = MetricsRow(bundleId: bundleId, environment: environment, intervalStart: start, intervalEnd: end, currency: currency)
                for subscription in subscriptions { add(subscription, currency: currency, start: start, end: end, choices: choices, asOf: asOf, points: pricePoints?.points ?? [], to: &row) }
                rows.append(row)
            }
        }
        return rows
    }

    func add(_ subscription: Subscription, currency: String, start: Date, end: Date, choices: MetricsChoices, asOf: Date, points: [PricePoints.Point], to row: inout MetricsRow) {
        let periods = subscription.periods
        var paidSecondsBefore = 0.0
        func within(_ date: Date) -> Bool { date >= start && date < end }
        for (index, period) in periods.enumerated() {
            defer { if !period.isTrial { paidSecondsBefore += period.accessEnds.timeIntervalSince(period.starts) } }
            guard period.currency == currency else { continue }
            let previous = index > 0 ? periods[index - 1] : nil
            let next = index + 1 < periods.count ? periods[index + 1] : nil
            let secondYear = choices.smallBusinessProgram || paidSecondsBefore >= 365 * 86_400
            // Apple's proceeds where a price point matches the period's product, storefront and price.
            let point = period.isTrial ? nil : points.first { ($0.productId, $0.territory, $0.customerPrice) == (period.productId, period.storefront, period.price) }
            let share = point.map { Double(secondYear ? $0.proceedsYear2 : $0.proceeds) / Double($0.customerPrice) } ?? (secondYear ? 0.85 : 0.70)
            // Stocks at the interval's end.
            if period.accessEnds > period.starts, period.starts <= end, period.accessEnds > end {
                if period.isTrial {
                    row.activeTrials += 1
                } else {
                    row.activeSubscriptions += 1
                    if let factor = period.factor { row.mrr += Int64((Double(period.price) * factor).rounded()) } else { row.activeUnnormalised += 1 }
                }
            }
            // What started in the interval.
            if within(period.starts) {
                if period.isTrial {
                    row.trialStarts += 1
                } else {
                    if index == 0 { row.newSubscriptions += 1 }
                    if previous?.isTrial == true { row.trialConversions += 1 }
                    if let previous, !previous.isTrial, previous.accessEnds < period.starts, period.reason != "RENEWAL" { row.reactivations += 1 }
                    row.gross += period.price
                    row.estimatedProceeds += Int64((Double(period.price) * share).rounded())
                    if point == nil { row.proceedsEstimated += 1 }
                }
            }
            // What ended in it.
            if period.accessEnds > period.starts, period.accessEnds <= asOf, within(period.accessEnds) {
                if period.isTrial {
                    row.trialsEnded += 1
                    if next.map({ !$0.isTrial }) == true { row.trialsEndedConverted += 1 }
                } else if next == nil || (next!.starts > period.accessEnds && next!.reason != "RENEWAL") {
                    row.churned += 1
                    if let refunded = period.refundedAt, refunded <= period.accessEnds {
                        row.churnedRefund += 1
                    } else if let said = subscription.expired.first(where: { $0.date >= period.accessEnds && (next == nil || $0.date < next!.starts) })?.subtype {
                        if ["VOLUNTARY", "PRICE_INCREASE"].contains(said) { row.churnedVoluntary += 1 } else if said == "BILLING_RETRY" { row.churnedBilling += 1 }
                    } else if next != nil {
                    } else if [1, 3].contains(subscription.expirationIntent) {
                        row.churnedVoluntary += 1
                    } else if subscription.expirationIntent == 2 || [3, 4].contains(subscription.status) {
                        row.churnedBilling += 1
                    }
                }
            }
            // Refunds, where the choice places them.
            if let refunded = period.refundedAt, refunded <= asOf, within(choices.refunds == .atPurchase ? period.starts : refunded) {
                row.refundCount += 1
                row.refundAmount += period.refundAmount
                row.estimatedProceeds -= Int64((Double(period.refundAmount) * share).rounded())
            }
        }
    }
}
