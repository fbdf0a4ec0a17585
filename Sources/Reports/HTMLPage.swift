package import Foundation
import RunResults

/// The pieces every report.html shares: escaping, numbers and times for people, the style sheet,
/// the small inline script that adds local-time hover titles, and the timeline chart. A page is
/// self-contained: nothing is fetched from anywhere, so it reads offline and attaches to a ticket.
package enum HTMLPage {
    /// Text for an element or an attribute value.
    package static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }

    /// 1234567 → "1,234,567", the same on every machine.
    package static func number(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return (value < 0 ? "-" : "") + grouped
    }

    /// "1 notification" / "3 notifications".
    package static func count(_ value: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(number(value)) \(value == 1 ? singular : (plural ?? singular + "s"))"
    }

    /// An ISO 8601 time shown in UTC ("2026-11-20 14:05 UTC"); the page's script adds the
    /// reader's local time as its hover title.
    package static func time(_ iso: String, seconds: Bool = false) -> String {
        guard let date = ReportTimeline.parse(iso) else { return escape(iso) }
        return "<time datetime=\"\(escape(iso))\" data-utc=\"\(escape(iso))\" title=\"\(escape(utc(date, seconds: true)))\">\(utc(date, seconds: seconds))</time>"
    }

    package static func utc(_ date: Date, seconds: Bool = false) -> String {
        var style = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!).year().month().day().dateTimeSeparator(.space).time(includingFractionalSeconds: false)
        style = style.timeSeparator(.colon)
        let text = date.formatted(style)
        return (seconds ? text : String(text.prefix(16))) + " UTC"
    }

    /// "2 h 5 min", "40 s".
    package static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        if total < 60 { return "\(max(0, total)) s" }
        let minutes = total / 60
        if minutes < 60 { return "\(minutes) min \(total % 60) s" }
        let hours = minutes / 60
        if hours < 48 { return "\(hours) h \(minutes % 60) min" }
        return "\(hours / 24) d \(hours % 24) h"
    }

    /// The document's start: title, style sheet, the opening of the body.
    package static func head(title: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="color-scheme" content="light dark">
        <title>\(escape(title))</title>
        <style>\(style)</style>
        </head>
        <body>
        <main>
        """
    }

    /// The document's end, with the script that turns each time's hover title to local time.
    package static let foot = """
        </main>
        <script>\(script)</script>
        </body>
        </html>

        """

    /// Adds the reader's local time to every `data-utc` element's hover title (an SVG element's
    /// `<title>` child, or the `title` attribute); without script the titles stay in UTC.
    static let script = """
        (function () {
          for (const element of document.querySelectorAll('[data-utc]')) {
            const date = new Date(element.getAttribute('data-utc'));
            if (isNaN(date.getTime())) continue;
            const local = date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) + ' your time';
            const title = element.querySelector(':scope > title');
            if (title) title.textContent = local + ' · ' + title.textContent;
            else element.setAttribute('title', local + ' · ' + element.getAttribute('title'));
          }
        })();
        """

    static let style = """
        :root { --bg: #ffffff; --fg: #1d2330; --muted: #5d6678; --line: #d9dde5; --panel: #f5f7fa; --good: #1a7f37; --warn: #9a6700; --bad: #cf222e; --mark: #fff1b8; --shade: rgba(207, 34, 46, 0.08); }
        @media (prefers-color-scheme: dark) { :root { --bg: #0f1218; --fg: #e3e7ee; --muted: #9aa3b2; --line: #2c3340; --panel: #171b23; --good: #3fb950; --warn: #d29922; --bad: #f85149; --mark: #5a4a00; --shade: rgba(248, 81, 73, 0.12); } }
        * { box-sizing: border-box; }
        body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
        main { max-width: 1080px; margin: 0 auto; padding: 24px 20px 48px; }
        h1 { font-size: 22px; margin: 0 0 8px; }
        h3 { font-size: 15px; font-weight: 600; margin: 20px 0 4px; }
        h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
        code, .id { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
        .verdict { font-size: 17px; padding: 12px 16px; border-radius: 8px; border-left: 6px solid var(--good); background: var(--panel); margin: 12px 0 16px; }
        .verdict.attention { border-left-color: var(--warn); }
        .verdict strong { font-weight: 650; }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
        .facts dt { color: var(--muted); }
        .facts dd { margin: 0; }
        .muted { color: var(--muted); }
        .num { text-align: right; font-variant-numeric: tabular-nums; }
        table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 14px; }
        th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { color: var(--muted); font-weight: 600; }
        td.changed { background: var(--mark); }
        details { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; background: var(--panel); }
        details > summary { cursor: pointer; padding: 6px 10px; }
        details > :not(summary) { margin: 0 10px 10px; width: calc(100% - 20px); background: var(--bg); }
        .badge { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 12px; border: 1px solid var(--line); }
        .badge.bad { color: var(--bad); border-color: var(--bad); }
        .badge.warn { color: var(--warn); border-color: var(--warn); }
        .badge.good { color: var(--good); border-color: var(--good); }
        .chart { width: 100%; height: auto; display: block; }
        .chart text { fill: var(--muted); font-size: 11px; }
        .chart .axis { stroke: var(--line); }
        .chart .outage { fill: var(--shade); }
        .chart .step:hover .hit { fill: var(--line); fill-opacity: 0.5; }
        .chart .hit { fill: transparent; }
        .legend { font-size: 13px; margin: 4px 0; }
        .legend span { margin-left: 14px; white-space: nowrap; }
        .legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 5px; border-radius: 2px; background: var(--swatch); }
        .more { color: var(--muted); font-style: italic; }
        @media print { body { background: #fff; color: #000; } h2, h3 { break-after: avoid; } details, .chart, tr { break-inside: avoid; } .chart .step:hover .hit { fill: transparent; } }
        """

    /// Colours for failed first attempts (warm) and missed types (cool), readable on light and dark.
    static let failedColours = ["#d1495b", "#edae49", "#f28e2b", "#8e6c8a", "#9c755f", "#5b3a29", "#ff9da7", "#bab0ac"]
    static let missedColours = ["#00798c", "#30638e", "#59a14f", "#76b7b2", "#4e79a7", "#8cd17d", "#499894", "#86bcb6"]

    package static func colour(failed index: Int) -> String { failedColours[index % failedColours.count] }
    package static func colour(missed index: Int) -> String { missedColours[index % missedColours.count] }
}
