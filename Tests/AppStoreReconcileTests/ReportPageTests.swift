import Foundation
import Reconciliation
import TestSupport
import Testing
import ThrowawayPostgres

/// Headless Chromium (Debian's `chromium`, which `scripts/test` installs when missing): the page
/// as a browser builds it, its console, and a screenshot.
enum HeadlessChromium {
    static var path: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static func arguments(_ extra: [String]) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"] + extra
    }

    /// The DOM after the page's scripts ran, and every console message the page produced.
    static func load(_ file: String) throws -> (dom: String, console: [String]) {
        let chromium = try #require(path, "headless Chromium is not installed: scripts/test installs Debian's chromium")
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("chromium-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let result = try ChildProcess.run(chromium, arguments(["--user-data-dir=\(home)", "--dump-dom", "file://" + file]))
        #expect(result.status == 0, "\(result.standardError.suffix(2000))")
        return (result.standardOutput, result.standardError.split(separator: "\n").filter { $0.contains(":CONSOLE") }.map(String.init))
    }

    static func screenshot(_ file: String, to png: String, width: Int = 1100, height: Int = 1400) throws {
        let chromium = try #require(path)
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("chromium-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let result = try ChildProcess.run(chromium, arguments(["--user-data-dir=\(home)", "--window-size=\(width),\(height)", "--screenshot=\(png)", "file://" + file]))
        #expect(result.status == 0, "\(result.standardError.suffix(2000))")
    }

    /// Each match of `pattern`'s first capture group.
    static func captures(_ pattern: String, in text: String) throws -> [String] {
        let expression = try NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0]) }
        }
    }
}

@Suite("report.html in a real browser")
struct ReportPageTests {
    /// The check itself: a page whose script fails is seen failing (so a clean console below
    /// means something).
    @Test func aConsoleErrorOnAPageIsSeen() throws {
        let scratch = try CommandLineTests.Scratch()
        let page = try scratch.write("broken.html", "<!DOCTYPE html><html><body><p>x</p><script>notDefined();</script></body></html>")
        let loaded = try HeadlessChromium.load(page)
        #expect(loaded.console.contains { $0.contains("notDefined") }, "\(loaded.console)")
    }

    /// The demo's run, as a person opens it: the page loads without a console message, holds no
    /// reference to anything outside itself, its chart has one bar group per step of the window
    /// with the totals report.json gives (the missed ones equal to the run's missed count, by type
    /// as the missed list says), its script gave each time a local-time title, and a screenshot
    /// is written.
    @Test func theDemosReportLoadsCleanAndItsChartHoldsTheRunsFigures() async throws {
        let scratch = try CommandLineTests.Scratch()
        let demo = try await BuiltBinary.run(["demo", "--customers", "80", "--report-dir", scratch.url.path], binary: BuiltBinary.devPath)
        #expect(demo.exitCode == 0, "\(demo.combined.suffix(2000))")
        let directory = scratch.url.path + "/run/com.example.photos/Production"
        let report = try JSONDecoder().decode(ReportShape.self, from: Data(contentsOf: URL(fileURLWithPath: directory + "/report.json")))
        let timeline = try #require(report.timeline)
        #expect(report.counts.missed > 0, "the demo's outage missed notifications")

        let (dom, console) = try HeadlessChromium.load(directory + "/report.html")
        #expect(console.isEmpty, "console: \(console)")
        // Self-contained: nothing in the file that could fetch (no src, href, url() or @import at all).
        let file = try String(contentsOfFile: directory + "/report.html", encoding: .utf8)
        for reference in ["src=", "href=", "url(", "@import", "<link"] { #expect(!file.contains(reference), "\(reference) in report.html") }

        // The chart: one group per step, each step's figures, the totals.
        let chart = try #require(try HeadlessChromium.captures(#"(<svg class="chart" id="timeline"[\s\S]*?</svg>)"#, in: dom).first)
        let steps = try HeadlessChromium.captures(#"<g class="step" data-start="([^"]+)""#, in: chart)
        #expect(steps == timeline.steps.map(\.start), "one bar group per step, in order")
        #expect((20...60).contains(steps.count), "\(steps.count) steps")
        let failed = try HeadlessChromium.captures(#"<g class="step"[^>]* data-failed="(\d+)""#, in: chart).compactMap { Int($0) }
        let missed = try HeadlessChromium.captures(#"<g class="step"[^>]* data-missed="(\d+)""#, in: chart).compactMap { Int($0) }
        #expect(failed == timeline.steps.map { $0.failedFirstAttempts.values.reduce(0, +) })
        #expect(missed.reduce(0, +) == report.counts.missed, "every missed notification is in a bar")
        #expect(failed.reduce(0, +) >= report.deliveryFailures.byFirstAttemptResult.values.reduce(0, +), "the missed ones' failed attempts are among the bars'")
        // Each bar's segments add up to its group's figure.
        let segments = try HeadlessChromium.captures(#"(<rect class="seg"[^>]*>)"#, in: chart)
        let missedSegments = try segments.filter { $0.contains("data-kind=\"missed\"") }.flatMap { try HeadlessChromium.captures(#"data-count="(\d+)""#, in: $0) }
        #expect(missedSegments.compactMap { Int($0) }.reduce(0, +) == report.counts.missed)
        #expect(chart.contains("class=\"outage\""), "the outage is shaded")
        // The demo's outage is a few hours of a week: the close-up shows it with the same totals.
        let closeUp = try #require(try HeadlessChromium.captures(#"(<svg class="chart" id="closeup"[\s\S]*?</svg>)"#, in: dom).first)
        let closeUpTotal = try HeadlessChromium.captures(#"<svg class="chart" id="closeup"[^>]* data-failed="(\d+)""#, in: closeUp).first
        #expect(closeUpTotal == String(failed.reduce(0, +)), "the close-up holds every failed first attempt")
        #expect((1...60).contains(try HeadlessChromium.captures(#"(<g class="step")"#, in: closeUp).count))

        // The missed notifications by type, as the full list in report.json counts them.
        var byType: [String: Int] = [:]
        for entry in report.missed { byType[entry.notificationType, default: 0] += 1 }
        let rows = try HeadlessChromium.captures(#"<tr data-type="([^"]+)" data-count="\d+""#, in: dom)
        let counts = try HeadlessChromium.captures(#"<tr data-type="[^"]+" data-count="(\d+)""#, in: dom).compactMap { Int($0) }
        #expect(Dictionary(uniqueKeysWithValues: zip(rows, counts)) == byType)
        #expect(dom.contains("<details class=\"missed-group\""))
        // The verdict, the facts, and the script's local-time titles.
        #expect(dom.contains("id=\"verdict\"") && dom.contains(report.run.id))
        #expect(dom.contains("your time"), "the script ran and gave times their local-time title")

        let png = scratch.url.path + "/report.png"
        try HeadlessChromium.screenshot(directory + "/report.html", to: png)
        let size = (try FileManager.default.attributesOfItem(atPath: png)[.size] as? Int) ?? 0
        #expect(size > 20_000, "a screenshot of \(size) bytes")
        print("report.html: \(steps.count) steps, \(failed.reduce(0, +)) failed first attempts, \(missed.reduce(0, +)) missed; screenshot \(size) bytes")

        // The dry run and the second run have their page too; the second missed nothing.
        for run in ["dry-run", "second-run"] {
            let other = try HeadlessChromium.load(scratch.url.path + "/\(run)/report.html")
            #expect(other.console.isEmpty, "\(run): \(other.console)")
        }
    }
}

/// What the test reads of report.json.
struct ReportShape: Decodable {
    struct Counts: Decodable { var missed: Int }
    struct Missed: Decodable { var notificationType: String }
    struct Run: Decodable { var id: String }
    struct DeliveryFailures: Decodable { var byFirstAttemptResult: [String: Int] }
    var counts: Counts
    var missed: [Missed]
    var run: Run
    var deliveryFailures: DeliveryFailures
    var timeline: ReportTimeline?
}
