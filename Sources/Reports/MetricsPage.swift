import Foundation
import RevenueMetrics

/// `metrics`'s report.html: per App Store and currency, MRR and active subscriptions over time,
/// new against churned subscriptions, trial conversion and refunds, each an inline SVG chart whose
/// marks carry their figures (`data-interval`, `data-value`) so that a test, or a person with the
/// browser's inspector, reads the numbers rather than the pixels; then the rows as a table.
enum MetricsPage {
    struct Series {
        var name: String
        var colour: String
        var values: [Double]
        var text: [String]
    }

    static func html(_ result: MetricsResult) -> String {
        var page = HTMLPage.head(title: "appstore-reconcile metrics")
        page += "<h1>Metrics</h1>"
        page += "<p class=\"muted\">\(HTMLPage.escape(MetricsFiles.appleNote))</p>"
        page += "<p>From \(HTMLPage.utc(result.from)) to \(HTMLPage.utc(result.to)), by \(result.choices.interval.rawValue); MRR convention "
            + "<code>\(result.choices.convention.rawValue)</code>, refunds counted at <code>\(result.choices.refunds.rawValue)</code>, grace period <code>\(result.choices.gracePeriod.rawValue)</code>, "
            + "proceeds \(result.choices.smallBusinessProgram ? "85% (Small Business Program)" : "70% in a subscription's first year of paid service, 85% after").</p>"
        if !result.unnormalised.isEmpty {
            page += "<p class=\"warn\" id=\"unnormalised\">Left out of MRR, their duration neither configured (<code>products</code>) nor derivable: "
                + result.unnormalised.map { "\(HTMLPage.escape($0.productId)) (\(HTMLPage.escape($0.bundleId)) \(HTMLPage.escape($0.environment)), \(HTMLPage.count(Int($0.periods), "period")))" }
                .joined(separator: ", ") + ".</p>"
        }
        var keys: [String] = []
        var groups: [String: [MetricsRow]] = [:]
        for row in result.rows {
            let key = "\(row.bundleId) \(row.environment) \(row.currency)\(row.isTotal ? " (total)" : "")"
            if groups[key] == nil { keys.append(key) }
            groups[key, default: []].append(row)
        }
        if keys.isEmpty { page += "<p>The ledger holds no period of an auto-renewable subscription.</p>" }
        for (index, key) in keys.enumerated() {
            let rows = groups[key]!
            let labels = rows.map { MetricsFiles.iso($0.intervalStart) }
            page += "<section class=\"app-store\" data-key=\"\(HTMLPage.escape(key))\"><h2>\(HTMLPage.escape(key))</h2>"
            page += chart(id: "mrr-\(index)", title: "MRR at each interval's end (\(rows[0].currency))", labels: labels, bars: false, series: [
                Series(name: "mrr", colour: "#30638e", values: rows.map { Double($0.mrr) / 1000 }, text: rows.map { MetricsFiles.amount($0.mrr) })
            ])
            page += chart(id: "active-\(index)", title: "Active subscriptions and trials at each interval's end", labels: labels, bars: false, series: [
                Series(name: "active_subscriptions", colour: "#00798c", values: rows.map { Double($0.activeSubscriptions) }, text: rows.map { "\($0.activeSubscriptions)" }),
                Series(name: "active_trials", colour: "#edae49", values: rows.map { Double($0.activeTrials) }, text: rows.map { "\($0.activeTrials)" }),
            ])
            page += chart(id: "flow-\(index)", title: "New (and trial conversions) against churned, per interval", labels: labels, bars: true, series: [
                Series(name: "new_subscriptions", colour: "#59a14f", values: rows.map { Double($0.newSubscriptions + $0.trialConversions) }, text: rows.map { "\($0.newSubscriptions + $0.trialConversions)" }),
                Series(name: "churned", colour: "#d1495b", values: rows.map { Double($0.churned) }, text: rows.map { "\($0.churned)" }),
            ])
            page += chart(id: "trials-\(index)", title: "Trial conversion: share of the trials that ended in the interval a paid period followed", labels: labels, bars: true, series: [
                Series(name: "trial_conversion_rate", colour: "#8e6c8a", values: rows.map { ($0.trialConversionRate ?? 0) * 100 }, text: rows.map { $0.trialConversionRate.map(MetricsFiles.rate) ?? "" })
            ])
            page += chart(id: "refunds-\(index)", title: "Refunds per interval (amount, \(rows[0].currency))", labels: labels, bars: true, series: [
                Series(name: "refund_amount", colour: "#f28e2b", values: rows.map { Double($0.refundAmount) / 1000 }, text: rows.map { MetricsFiles.amount($0.refundAmount) })
            ])
            page += table(rows)
            page += "</section>"
        }
        return page + HTMLPage.foot
    }

    static func chart(id: String, title: String, labels: [String], bars: Bool, series: [Series]) -> String {
        let (width, height, left, right, top, bottom) = (960.0, 220.0, 60.0, 8.0, 10.0, 36.0)
        let peak = max(series.flatMap(\.values).max() ?? 0, 1)
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let slot = plotWidth / Double(max(labels.count, 1))
        func y(_ value: Double) -> Double { top + plotHeight - plotHeight * value / peak }
        func f(_ value: Double) -> String { String(format: "%.1f", value) }
        var svg = "<figure><figcaption>\(HTMLPage.escape(title)) "
            + series.map { "<span class=\"key\" style=\"color:\($0.colour)\">■ \($0.name)</span>" }.joined(separator: " ")
            + "</figcaption><svg class=\"chart\" id=\"\(id)\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"\(HTMLPage.escape(title))\">"
        for fraction in [0.0, 0.5, 1.0] {
            svg += "<line class=\"axis\" x1=\(f(left)) x2=\(f(width - right)) y1=\(f(y(peak * fraction))) y2=\(f(y(peak * fraction)))></line>"
                + "<text x=\(f(left - 6)) y=\(f(y(peak * fraction) + 4)) text-anchor=\"end\">\(HTMLPage.escape(fraction == 0 ? "0" : String(format: peak * fraction >= 100 ? "%.0f" : "%.2f", peak * fraction)))</text>"
        }
        let every = max(1, labels.count / 8)
        for (index, label) in labels.enumerated() where index % every == 0 {
            svg += "<text x=\(f(left + slot * (Double(index) + 0.5))) y=\(f(height - 14)) text-anchor=\"middle\">\(HTMLPage.escape(String(label.prefix(10))))</text>"
        }
        for (number, line) in series.enumerated() {
            svg += "<g class=\"series\" data-series=\"\(line.name)\">"
            var path = ""
            for (index, value) in line.values.enumerated() {
                let x = left + slot * Double(index)
                let mark: String
                if bars {
                    let barWidth = max(1, slot * 0.8 / Double(series.count))
                    mark = "<rect x=\(f(x + slot * 0.1 + barWidth * Double(number))) y=\(f(y(value))) width=\(f(barWidth)) height=\(f(max(0, top + plotHeight - y(value)))) fill=\"\(line.colour)\""
                } else {
                    path += (path.isEmpty ? "M" : "L") + "\(f(x + slot / 2)),\(f(y(value)))"
                    mark = "<circle cx=\(f(x + slot / 2)) cy=\(f(y(value))) r=2.5 fill=\"\(line.colour)\""
                }
                svg += mark + " class=\"point\" data-interval=\"\(labels[index])\" data-value=\"\(HTMLPage.escape(line.text[index]))\">"
                    + "<title>\(HTMLPage.escape(String(labels[index].prefix(10)))): \(line.name) \(HTMLPage.escape(line.text[index]))</title>"
                    + (bars ? "</rect>" : "</circle>")
            }
            if !bars { svg += "<path d=\"\(path)\" fill=\"none\" stroke=\"\(line.colour)\" stroke-width=\"1.5\"></path>" }
            svg += "</g>"
        }
        return svg + "</svg></figure>"
    }

    static func table(_ rows: [MetricsRow]) -> String {
        let shown = ["interval_start", "active_subscriptions", "active_trials", "mrr", "new_subscriptions", "trial_conversions", "churned", "reactivations", "gross", "refund_amount", "net", "estimated_proceeds"]
        let indexes = shown.compactMap { MetricsFiles.fields.firstIndex(of: $0) }
        var html = "<details><summary>The figures</summary><table class=\"metrics\"><thead><tr>"
            + shown.map { "<th>\($0)</th>" }.joined() + "</tr></thead><tbody>"
        for row in rows {
            let values = MetricsFiles.values(row)
            html += "<tr>" + indexes.map { index in
                let value = values[index]
                let text = value.hasPrefix("\"") ? String(value.dropFirst().dropLast().prefix(10)) : value
                return "<td>\(HTMLPage.escape(text))</td>"
            }.joined() + "</tr>"
        }
        return html + "</tbody></table></details>"
    }
}
