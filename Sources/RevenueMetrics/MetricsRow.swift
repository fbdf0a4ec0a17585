package import Foundation

/// One row of `metrics`: one App Store (bundle ID and environment), one interval and one currency,
/// as app_store.metrics computes it (docs/metrics.md defines each figure). Amounts are in
/// milliunits of `currency` (9990 is 9.99), as Apple gives prices.
package struct MetricsRow: Sendable, Equatable {
    package var bundleId: String
    package var environment: String
    package var intervalStart: Date
    package var intervalEnd: Date
    package var currency: String
    /// A row that adds every currency's row of its App Store and interval, converted by `--rates`.
    package var isTotal = false

    /// At `intervalEnd`: paid periods whose access covers it (family members left out, auto-renew
    /// off counted until the access ends), and free trials likewise.
    package var activeSubscriptions: Int64 = 0
    package var activeTrials: Int64 = 0
    /// At `intervalEnd`: each active paid period's price normalised to a month, summed.
    package var mrr: Int64 = 0
    package var newSubscriptions: Int64 = 0
    package var trialStarts: Int64 = 0
    package var trialConversions: Int64 = 0
    /// Trials whose access ended in the interval, and of those the ones a paid period followed.
    package var trialsEnded: Int64 = 0
    package var trialsEndedConverted: Int64 = 0
    package var churned: Int64 = 0
    package var churnedVoluntary: Int64 = 0
    package var churnedBilling: Int64 = 0
    package var churnedRefund: Int64 = 0
    package var reactivations: Int64 = 0
    package var gross: Int64 = 0
    package var refundCount: Int64 = 0
    package var refundAmount: Int64 = 0
    package var estimatedProceeds: Int64 = 0
    /// Active paid periods whose product's duration is neither configured nor derivable: counted
    /// in `activeSubscriptions`, left out of `mrr`.
    package var activeUnnormalised: Int64 = 0
    /// Paid periods started in the interval whose `estimatedProceeds` are the 70% / 85% estimate:
    /// no price point of `--price-points` matched their product, storefront and price (every
    /// paid period, without the flag).
    package var proceedsEstimated: Int64 = 0

    package init(bundleId: String, environment: String, intervalStart: Date, intervalEnd: Date, currency: String) {
        self.bundleId = bundleId
        self.environment = environment
        self.intervalStart = intervalStart
        self.intervalEnd = intervalEnd
        self.currency = currency
    }

    package var arr: Int64 { mrr * 12 }
    package var net: Int64 { gross - refundAmount }
    /// Of the trials that ended in the interval, the share a paid period followed; nil when none ended.
    package var trialConversionRate: Double? {
        trialsEnded == 0 ? nil : Double(trialsEndedConverted) / Double(trialsEnded)
    }
}

/// The product of one `metrics` command: its rows, and the products whose periods it could not
/// normalise to a month.
package struct MetricsResult: Sendable, Equatable {
    package var rows: [MetricsRow]
    package var unnormalised: [UnnormalisedProduct]
    package var choices: MetricsChoices
    package var from: Date
    package var to: Date
    /// `--as-known-at`: the ledger as it was then (nil: now).
    package var knownAt: Date? = nil
    /// `--price-points`: how many of Apple's price points were given (nil: none, every proceeds
    /// figure the 70% / 85% estimate).
    package var pricePoints: Int? = nil

    package init(rows: [MetricsRow], unnormalised: [UnnormalisedProduct], choices: MetricsChoices, from: Date, to: Date) {
        self.rows = rows
        self.unnormalised = unnormalised
        self.choices = choices
        self.from = from
        self.to = to
    }
}

/// A product whose standard duration is neither in the configuration's `products` nor derivable
/// from its periods' lengths: its periods are counted but not normalised.
package struct UnnormalisedProduct: Sendable, Equatable {
    package var bundleId: String
    package var environment: String
    package var productId: String
    package var periods: Int64

    package init(bundleId: String, environment: String, productId: String, periods: Int64) {
        self.bundleId = bundleId
        self.environment = environment
        self.productId = productId
        self.periods = periods
    }
}
