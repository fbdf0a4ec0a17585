import Foundation
package import RunResults

/// report.html's chart: one bar group per step of the timeline (failed first attempts stacked by
/// `sendAttemptResult` on the left, missed notifications stacked by type on the right), the
/// outages shaded behind, an hour or day axis in UTC, and a hover title per step. Inline SVG.
/// Each group carries its figures (`data-failed`, `data-missed`) so that a test, or a person with
/// the browser's inspector, reads the chart's numbers rather than its pixels.
package enum TimelineChart {
    static let width = 960.0
    static let height = 260.0
    static let left = 44.0
    static let right = 8.0
    static let top = 10.0
    static let bottom = 40.0

    /// `order`: the results and types in stacking (and colour) order; the timeline's own by
    /// default, the whole window's for a close-up so that its colours match the legend.
    package static func svg(
        _ timeline: ReportTimeline, shaded: [ReportTimeline.Span], id: String = "timeline", order: (results: [String], types: [String])? = nil
    ) -> String {
        let steps = timeline.steps
        let results = order?.results ?? timeline.results
        let types = order?.types ?? timeline.types
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let slot = plotWidth / Double(max(steps.count, 1))
        let peak = steps.map { max($0.failedTotal, $0.missedTotal) }.max() ?? 0
        let ticks = ticks(peak)
        let scale = ticks.last!
        func y(_ value: Int) -> Double { top + plotHeight - plotHeight * Double(value) / Double(scale) }
        guard let origin = steps.first.flatMap({ ReportTimeline.parse($0.start) }) else { return "" }
        func x(_ date: Date) -> Double {
            left + plotWidth * date.timeIntervalSince(origin) / (Double(timeline.stepSeconds) * Double(steps.count))
        }

        var svg = "<svg class=\"chart\" id=\"\(id)\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" "
            + "aria-label=\"Failed first delivery attempts and missed notifications per \(stepName(timeline.stepSeconds))\" "
            + "data-steps=\"\(steps.count)\" data-step-seconds=\"\(timeline.stepSeconds)\" data-failed=\"\(timeline.failedTotal)\" data-missed=\"\(timeline.missedTotal)\">"
        // Outages behind everything.
        for span in shaded {
            guard let start = ReportTimeline.parse(span.start), let end = ReportTimeline.parse(span.end) else { continue }
            let from = max(left, x(start))
            let to = min(width - right, max(x(end), from + 2))
            guard to > from else { continue }
            svg += "<rect class=\"outage\" data-start=\"\(HTMLPage.escape(span.start))\" data-end=\"\(HTMLPage.escape(span.end))\" x=\(f(from)) y=\(f(top)) width=\(f(to - from)) height=\(f(plotHeight))>"
                + "<title>outage: \(HTMLPage.utc(start)) to \(HTMLPage.utc(end))</title></rect>"
        }
        // Grid and y axis.
        for tick in ticks {
            let ty = y(tick)
            svg += "<line class=\"axis\" x1=\(f(left)) x2=\(f(width - right)) y1=\(f(ty)) y2=\(f(ty))></line>"
                + "<text x=\(f(left - 6)) y=\(f(ty + 4)) text-anchor=\"end\">\(HTMLPage.number(tick))</text>"
        }
        // The bars.
        let barWidth = max(1, slot * 0.38)
        for (index, step) in steps.enumerated() {
            let x0 = left + slot * Double(index)
            var group = "<g class=\"step\" data-start=\"\(HTMLPage.escape(step.start))\" data-utc=\"\(HTMLPage.escape(step.start))\" data-failed=\"\(step.failedTotal)\" data-missed=\"\(step.missedTotal)\">"
            group += "<title>\(HTMLPage.escape(stepTitle(step, seconds: timeline.stepSeconds, results: results, types: types)))</title>"
            group += "<rect class=\"hit\" x=\(f(x0)) y=\(f(top)) width=\(f(slot)) height=\(f(plotHeight))></rect>"
            group += stack(step.failedFirstAttempts, order: results, kind: "failed", x: x0 + slot * 0.1, width: barWidth, y: y) { HTMLPage.colour(failed: $0) }
            group += stack(step.missed, order: types, kind: "missed", x: x0 + slot * 0.1 + barWidth + slot * 0.04, width: barWidth, y: y) { HTMLPage.colour(missed: $0) }
            svg += group + "</g>"
        }
        // The x axis: a label every few steps, the date where the day changes.
        let every = max(1, Int((Double(steps.count) / 8).rounded(.up)))
        var lastDay = ""
        for (index, step) in steps.enumerated() where index % every == 0 && left + slot * Double(index) < width - right - 56 {
            guard let date = ReportTimeline.parse(step.start) else { continue }
            let text = HTMLPage.utc(date)  // "2026-11-20 14:00 UTC"
            let day = String(text.prefix(10))
            let clock = String(text.dropFirst(11).prefix(5))
            let lx = left + slot * Double(index)
            svg += "<line class=\"axis\" x1=\(f(lx)) x2=\(f(lx)) y1=\(f(top + plotHeight)) y2=\(f(top + plotHeight + 4))></line>"
            let label = timeline.stepSeconds >= 86_400 ? String(day.dropFirst(5)) : clock
            svg += "<text x=\(f(lx)) y=\(f(top + plotHeight + 16))>\(label)</text>"
            if day != lastDay, timeline.stepSeconds < 86_400 {
                svg += "<text x=\(f(lx)) y=\(f(top + plotHeight + 30))>\(day)</text>"
                lastDay = day
            }
        }
        return svg + "</svg>"
    }

    /// The failed first attempts closer, when they fill less than a third of the window.
    package static func closeUp(_ timeline: ReportTimeline) -> String {
        guard let closeUp = timeline.closeUp() else { return "" }
        let shaded = timeline.outages ?? closeUp.failureSpans()
        return "<h3 id=\"closeup-heading\">Close up: \(HTMLPage.time(closeUp.start)) to \(HTMLPage.time(closeUp.end)), one bar group per \(stepName(closeUp.stepSeconds))</h3>\n"
            + svg(closeUp, shaded: shaded, id: "closeup", order: (timeline.results, timeline.types)) + "\n"
    }

    /// The legend: which colour is which result and type, with each one's total.
    package static func legend(_ timeline: ReportTimeline, showsMissed: Bool = true) -> String {
        let totalsFailed = timeline.failedByResult
        let totalsMissed = timeline.missedByType
        var html = "<div class=\"legend\"><b>Failed first attempts</b>\(showsMissed ? " (left bar)" : ""):"
        let results = ReportTimeline.byCount(totalsFailed)
        if results.isEmpty { html += " <span class=\"muted\" style=\"--swatch: transparent\">none</span>" }
        for (index, result) in results.enumerated() {
            html += " <span style=\"--swatch: \(HTMLPage.colour(failed: index))\">\(HTMLPage.escape(result)) \(HTMLPage.number(totalsFailed[result] ?? 0))</span>"
        }
        guard showsMissed else { return html + "</div>" }
        html += "</div><div class=\"legend\"><b>Missed notifications</b> (right bar):"
        let types = ReportTimeline.byCount(totalsMissed)
        if types.isEmpty { html += " <span class=\"muted\" style=\"--swatch: transparent\">none</span>" }
        for (index, type) in types.enumerated() {
            html += " <span style=\"--swatch: \(HTMLPage.colour(missed: index))\">\(HTMLPage.escape(type)) \(HTMLPage.number(totalsMissed[type] ?? 0))</span>"
        }
        return html + "</div>"
    }

    static func stack(_ counts: [String: Int], order: [String], kind: String, x: Double, width: Double, y: (Int) -> Double, colour: (Int) -> String) -> String {
        var html = ""
        var below = 0
        for (index, key) in order.enumerated() {
            guard let count = counts[key], count > 0 else { continue }
            let top = y(below + count)
            let bottom = y(below)
            html += "<rect class=\"seg\" data-kind=\"\(kind)\" data-key=\"\(HTMLPage.escape(key))\" data-count=\"\(count)\" fill=\"\(colour(index))\" "
                + "x=\(f(x)) y=\(f(top)) width=\(f(width)) height=\(f(max(bottom - top, 0.5)))></rect>"
            below += count
        }
        return html
    }

    static func stepTitle(_ step: ReportTimeline.Step, seconds: Int, results: [String], types: [String]) -> String {
        let start = ReportTimeline.parse(step.start).map { HTMLPage.utc($0) } ?? step.start
        func parts(_ counts: [String: Int], _ order: [String]) -> String {
            order.compactMap { key in counts[key].map { "\(key) \(HTMLPage.number($0))" } }.joined(separator: ", ")
        }
        var text = "\(start), \(stepName(seconds)): \(HTMLPage.count(step.failedTotal, "failed first attempt"))"
        if step.failedTotal > 0 { text += " (\(parts(step.failedFirstAttempts, results)))" }
        text += "; \(HTMLPage.count(step.missedTotal, "missed notification"))"
        if step.missedTotal > 0 { text += " (\(parts(step.missed, types)))" }
        return text
    }

    /// "hour", "15 minutes", "day".
    package static func stepName(_ seconds: Int) -> String {
        switch seconds {
        case 86_400: "day"
        case 3600: "hour"
        case 60: "minute"
        case let s where s % 86_400 == 0: "\(s / 86_400) days"
        case let s where s % 3600 == 0: "\(s / 3600) hours"
        default: "\(seconds / 60) minutes"
        }
    }

    /// The axis: a tick every 1, 2 or 5 × 10ⁿ, the fewest that reach `value` in at most 5 ticks.
    static func ticks(_ value: Int) -> [Int] {
        var magnitude = 1
        while true {
            for factor in [1, 2, 5] {
                let tick = factor * magnitude
                let count = max(1, Int((Double(value) / Double(tick)).rounded(.up)))
                if count <= 5 { return (0...count).map { $0 * tick } }
            }
            magnitude *= 10
        }
    }

    /// A coordinate as an SVG attribute value.
    static func f(_ value: Double) -> String { "\"\(String(format: "%.1f", value))\"" }
}
