package import Foundation
package import RevenueMetrics

/// `metrics`'s files: metrics.json (`{"rows": [...]}`), metrics.csv (a header, then one line a
/// row, the same fields in the same order) and report.html (MetricsPage). Amounts are decimal
/// numbers of the currency's units (9990 milliunits is 9.99); times ISO 8601 in UTC.
package enum MetricsFiles {
    /// The fields of a row, in order: a contract (docs/metrics.md). `total` (a row of every
    /// currency converted by `--rates`), `active_unnormalised` and `proceeds_estimated` follow the
    /// named ones.
    package static let fields = [
        "bundle_id", "environment", "interval_start", "interval_end", "currency",
        "active_subscriptions", "active_trials", "mrr", "arr", "new_subscriptions", "trial_starts", "trial_conversions",
        "trial_conversion_rate", "churned", "churned_voluntary", "churned_billing", "churned_refund", "reactivations",
        "gross", "refund_count", "refund_amount", "net", "estimated_proceeds", "total", "active_unnormalised",
        "proceeds_estimated",
    ]

    /// Apple's word on these figures, said wherever they are shown.
    package static let appleNote =
        "Operating metrics, exact on Apple's signed data, not accounting: Apple says not to use a transaction's price or currency for revenue reconciliation or recognition; App Store Connect's reports are the record."

    /// 9990 → "9.99", -5 → "-0.005", 4000 → "4".
    package static func amount(_ milliunits: Int64) -> String {
        let whole = milliunits.magnitude / 1000
        let fraction = milliunits.magnitude % 1000
        var text = "\(milliunits < 0 ? "-" : "")\(whole)"
        if fraction != 0 {
            var digits = String(fraction)
            digits = String(repeating: "0", count: 3 - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text
    }

    static func iso(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
    }

    /// The row's values as JSON literals, in `fields` order.
    package static func values(_ row: MetricsRow) -> [String] {
        [
            json(row.bundleId), json(row.environment), json(iso(row.intervalStart)), json(iso(row.intervalEnd)), json(row.currency),
            "\(row.activeSubscriptions)", "\(row.activeTrials)", amount(row.mrr), amount(row.arr), "\(row.newSubscriptions)",
            "\(row.trialStarts)", "\(row.trialConversions)", row.trialConversionRate.map(rate) ?? "null", "\(row.churned)",
            "\(row.churnedVoluntary)", "\(row.churnedBilling)", "\(row.churnedRefund)", "\(row.reactivations)", amount(row.gross),
            "\(row.refundCount)", amount(row.refundAmount), amount(row.net), amount(row.estimatedProceeds), row.isTotal ? "true" : "false",
            "\(row.activeUnnormalised)", "\(row.proceedsEstimated)",
        ]
    }

    /// A share to four decimals: 0.6667.
    static func rate(_ value: Double) -> String {
        String(format: "%.4f", value)
    }

    static func json(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 { result += String(format: "\\u%04x", scalar.value) } else { result.unicodeScalars.append(scalar) }
            }
        }
        return result + "\""
    }

    package static func json(_ result: MetricsResult) -> String {
        var text = "{\"note\": \(json(appleNote)),\n \"from\": \(json(iso(result.from))), \"to\": \(json(iso(result.to))), "
        text += "\"as_known_at\": \(result.knownAt.map { json(iso($0)) } ?? "null"),\n"
        text += " \"choices\": {\"interval\": \(json(result.choices.interval.rawValue)), \"convention\": \(json(result.choices.convention.rawValue)), "
        text += "\"refunds\": \(json(result.choices.refunds.rawValue)), \"grace_period\": \(json(result.choices.gracePeriod.rawValue)), \"small_business_program\": \(result.choices.smallBusinessProgram), "
        text += "\"price_points\": \(result.pricePoints.map(String.init) ?? "null")},\n"
        text += " \"unnormalised\": [" + result.unnormalised.map { product in
            "{\"bundle_id\": \(json(product.bundleId)), \"environment\": \(json(product.environment)), \"product_id\": \(json(product.productId)), \"periods\": \(product.periods)}"
        }.joined(separator: ", ") + "],\n"
        text += " \"rows\": [\n"
        text += result.rows.map { row in
            "  {" + zip(fields, values(row)).map { "\"\($0)\": \($1)" }.joined(separator: ", ") + "}"
        }.joined(separator: ",\n")
        return text + "\n ]}\n"
    }

    package static func csv(_ result: MetricsResult) -> String {
        var text = fields.joined(separator: ",") + "\n"
        for row in result.rows {
            text += values(row).map { value in
                guard value.hasPrefix("\"") else { return value == "null" ? "" : value }
                // Text fields: CSV-quoted only when they need it (bundle IDs and currencies do not).
                let raw = String(value.dropFirst().dropLast())
                return raw.contains(where: { $0 == "," || $0 == "\"" || $0.isNewline }) ? "\"" + raw.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : raw
            }.joined(separator: ",") + "\n"
        }
        return text
    }

    /// For people: per App Store and currency, the last interval's figures and the whole range's
    /// flows, then the products left unnormalised.
    package static func summary(_ result: MetricsResult) -> String {
        var order: [String] = []
        var groups: [String: [MetricsRow]] = [:]
        for row in result.rows {
            let key = "\(row.bundleId) \(row.environment) \(row.currency)\(row.isTotal ? " (total)" : "")"
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(row)
        }
        var lines = [(result.knownAt.map { "As the ledger knew them at \(iso($0)): " } ?? "") + "Metrics by \(result.choices.interval.rawValue), \(iso(result.from)) to \(iso(result.to)) (MRR \(result.choices.convention.rawValue), refunds at \(result.choices.refunds.rawValue), grace period \(result.choices.gracePeriod.rawValue))."]
        if order.isEmpty { lines.append("The ledger holds no period of an auto-renewable subscription.") }
        for key in order {
            let rows = groups[key]!
            let last = rows.last!
            func sum(_ value: (MetricsRow) -> Int64) -> Int64 { rows.reduce(0) { $0 + value($1) } }
            lines.append(
                "\(key): at \(iso(last.intervalEnd)) MRR \(amount(last.mrr)), \(last.activeSubscriptions) active subscriptions, \(last.activeTrials) trials; "
                    + "over the range \(sum(\.newSubscriptions)) new, \(sum(\.trialConversions)) trial conversions, \(sum(\.churned)) churned, "
                    + "\(sum(\.reactivations)) reactivated, gross \(amount(sum(\.gross))), refunds \(sum(\.refundCount)) (\(amount(sum(\.refundAmount)))), "
                    + "estimated proceeds \(amount(sum(\.estimatedProceeds)))"
                    + (result.pricePoints == nil ? "." : " (\(sum(\.proceedsEstimated)) paid periods at the 70% / 85% estimate, the others at Apple's price points).")
            )
        }
        for product in result.unnormalised {
            lines.append("Not in MRR: \(product.productId) (\(product.bundleId) \(product.environment)), \(product.periods) periods: its duration is neither configured (`products`) nor derivable.")
        }
        lines.append(appleNote)
        return lines.joined(separator: "\n")
    }

    /// Writes metrics.json, metrics.csv and report.html into `directory` (0700, files 0600).
    package static func write(_ result: MetricsResult, to directory: String) throws {
        try ReportFiles.write(["metrics.json": json(result), "metrics.csv": csv(result), "report.html": MetricsPage.html(result)], to: directory)
    }
}
