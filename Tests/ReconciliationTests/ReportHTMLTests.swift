import Foundation
import Reports
import Ledger
@testable import Reconciliation
import Testing

/// report.html's decisions without a browser or a database: the chart's steps, what each event
/// counts in, the shaded stretches, and a page that stays small and complete at 300,000 missed
/// notifications. (The page in a real browser: `ReportPageTests`.)
@Suite("report.html: the timeline and the page")
struct ReportHTMLTests {
    static func date(_ text: String) -> Date { try! Date(text, strategy: .iso8601) }

    @Test func aWindowIsCutInto20To60StepsAlignedToTheStep() {
        // A day: hours. A week and an hour: 3 hours. Twelve hours: 15 minutes. Ninety minutes: 2 minutes.
        // Unaligned starts: the steps counted are the aligned ones (60 h from 00:30 is 61 hours'
        // steps, too many: 2 hours then).
        for (start, hours, step, count) in [
            ("2026-11-20T10:20:00Z", 24.0, 3600, 25), ("2026-11-20T10:20:00Z", 169.0, 10_800, 57), ("2026-11-20T10:20:00Z", 12.0, 900, 49),
            ("2026-11-20T10:20:00Z", 1.5, 120, 45), ("2026-11-20T00:00:00Z", 30 * 24.0, 43_200, 60), ("2026-11-20T00:30:00Z", 60.0, 7200, 31),
            ("2026-11-20T00:00:00Z", 60.0, 3600, 60),
        ] {
            let timeline = ReportTimeline(start: Self.date(start), end: Self.date(start).addingTimeInterval(hours * 3600))
            #expect(timeline.stepSeconds == step, "\(hours) h from \(start)")
            #expect(timeline.steps.count == count, "\(hours) h from \(start): \(timeline.steps.count) steps")
            #expect((20...60).contains(timeline.steps.count))
            // Aligned: each step starts on a whole multiple of the step.
            #expect(timeline.steps.allSatisfy { Int(Self.date($0.start).timeIntervalSince1970) % step == 0 })
        }
    }

    @Test func eachEventCountsInTheStepThatHoldsItSuccessIsNoFailureAndOutsideIsCountedApart() {
        var timeline = ReportTimeline(start: Self.date("2026-11-20T00:00:00Z"), end: Self.date("2026-11-21T00:00:00Z"))
        timeline.countFirstAttempt(at: Self.date("2026-11-20T05:59:59Z"), result: "NO_RESPONSE")
        timeline.countFirstAttempt(at: Self.date("2026-11-20T06:00:00Z"), result: "NO_RESPONSE")
        timeline.countFirstAttempt(at: Self.date("2026-11-20T06:30:00Z"), result: "TIMED_OUT")
        timeline.countFirstAttempt(at: Self.date("2026-11-20T06:30:00Z"), result: "SUCCESS")
        timeline.countMissed(at: Self.date("2026-11-20T06:10:00Z"), type: "DID_RENEW")
        timeline.countMissed(at: Self.date("2026-11-20T23:59:59Z"), type: "EXPIRED")
        timeline.countMissed(at: Self.date("2026-11-19T23:00:00Z"), type: "EXPIRED")
        // Before the window's start, though in the step the window's start falls in.
        var unaligned = ReportTimeline(start: Self.date("2026-11-20T00:30:00Z"), end: Self.date("2026-11-21T00:30:00Z"))
        unaligned.countFirstAttempt(at: Self.date("2026-11-20T00:10:00Z"), result: "NO_RESPONSE")
        #expect(unaligned.outsideFailedFirstAttempts == 1 && unaligned.failedTotal == 0)
        #expect(timeline.steps[5].failedFirstAttempts == ["NO_RESPONSE": 1])
        #expect(timeline.steps[6].failedFirstAttempts == ["NO_RESPONSE": 1, "TIMED_OUT": 1])
        #expect(timeline.steps[6].missed == ["DID_RENEW": 1])
        #expect(timeline.steps[23].missed == ["EXPIRED": 1])
        #expect(timeline.failedTotal == 3 && timeline.missedTotal == 2 && timeline.outsideMissed == 1 && timeline.outsideFailedFirstAttempts == 0)
        #expect(timeline.results == ["NO_RESPONSE", "TIMED_OUT"], "most first")
    }

    @Test func failuresLessThanTheGapApartAreOneShadedStretch() {
        var timeline = ReportTimeline(start: Self.date("2026-11-20T00:00:00Z"), end: Self.date("2026-11-21T00:00:00Z"))
        for hour in [2, 3, 4, 12] { timeline.countFirstAttempt(at: Self.date("2026-11-20T\(String(format: "%02d", hour)):15:00Z"), result: "TLS_ISSUE") }
        #expect(timeline.failureSpans(gap: 3600) == [.init(start: "2026-11-20T02:00:00Z", end: "2026-11-20T05:00:00Z"), .init(start: "2026-11-20T12:00:00Z", end: "2026-11-20T13:00:00Z")])
        #expect(timeline.failureSpans(gap: 10 * 3600).count == 1)
    }

    @Test func anOutageMuchShorterThanTheWindowGetsACloseUpWithTheSameTotals() throws {
        let start = Self.date("2026-11-16T00:00:00Z")
        var week = ReportTimeline(start: start, end: start.addingTimeInterval(7 * 86_400))
        let outage = Self.date("2026-11-22T13:10:00Z")
        for index in 0..<90 { week.countFirstAttempt(at: outage.addingTimeInterval(Double(index * 120)), result: index % 2 == 0 ? "TIMED_OUT" : "TLS_ISSUE") }
        for index in 0..<40 { week.countMissed(at: outage.addingTimeInterval(Double(index * 200)), type: "DID_RENEW") }
        for day in 0..<50 { week.countMissed(at: start.addingTimeInterval(Double(day) * 3600), type: "EXPIRED") }  // far from the outage: not in the close-up
        let closeUp = try #require(week.closeUp())
        #expect(closeUp.stepSeconds < week.stepSeconds && (1...60).contains(closeUp.steps.count), "\(closeUp.stepSeconds) s × \(closeUp.steps.count)")
        #expect(closeUp.failedTotal == 90 && closeUp.missedTotal == 40)
        // The close-up's colours are the legend's, which ranks the whole window (EXPIRED first).
        let html = TimelineChart.closeUp(week)
        let renewColour = HTMLPage.colour(missed: try #require(week.types.firstIndex(of: "DID_RENEW")))
        #expect(week.types.first == "EXPIRED" && html.contains("data-key=\"DID_RENEW\"") && !html.contains("data-key=\"EXPIRED\""))
        let fills = try NSRegularExpression(pattern: #"data-key="DID_RENEW" data-count="\d+" fill="([^"]+)""#)
            .matches(in: html, range: NSRange(html.startIndex..., in: html)).compactMap { Range($0.range(at: 1), in: html).map { String(html[$0]) } }
        #expect(!fills.isEmpty && fills.allSatisfy { $0 == renewColour }, "\(fills) against \(renewColour)")
        #expect(Self.date(closeUp.start) <= outage && Self.date(closeUp.end) >= outage.addingTimeInterval(89 * 120))
        // Failures spread over the whole window: the chart itself shows them; no close-up.
        var spread = ReportTimeline(start: start, end: start.addingTimeInterval(86_400))
        for hour in 0..<24 { spread.countFirstAttempt(at: start.addingTimeInterval(Double(hour * 3600)), result: "NO_RESPONSE") }
        #expect(spread.closeUp() == nil)
    }

    @Test func theChartHasOneGroupPerStepWhoseSegmentsAddUpToItsFigures() throws {
        var timeline = ReportTimeline(start: Self.date("2026-11-20T00:00:00Z"), end: Self.date("2026-11-21T00:00:00Z"))
        for minute in 0..<300 { timeline.countFirstAttempt(at: Self.date("2026-11-20T00:00:00Z").addingTimeInterval(Double(minute * 200)), result: minute % 3 == 0 ? "TIMED_OUT" : "NO_RESPONSE") }
        for minute in 0..<40 { timeline.countMissed(at: Self.date("2026-11-20T10:00:00Z").addingTimeInterval(Double(minute * 60)), type: minute % 4 == 0 ? "EXPIRED" : "DID_RENEW") }
        let svg = TimelineChart.svg(timeline, shaded: timeline.failureSpans())
        let groups = svg.components(separatedBy: "<g class=\"step\"").dropFirst()
        #expect(groups.count == 24)
        for (group, step) in zip(groups, timeline.steps) {
            let counts = try Self.captures(#"data-kind="(\w+)" data-key="[^"]+" data-count="(\d+)""#, group)
            #expect(counts.filter { $0.0 == "failed" }.reduce(0) { $0 + $1.1 } == step.failedTotal)
            #expect(counts.filter { $0.0 == "missed" }.reduce(0) { $0 + $1.1 } == step.missedTotal)
        }
        #expect(svg.contains("data-failed=\"300\"") && svg.contains("data-missed=\"40\""))
    }

    /// 300,000 missed notifications of 4 types, 20,000 rejected, 50,000 changed subscriptions, in
    /// spooled lists as a run keeps them: the page shows every count and the first rows of each
    /// group, names how many more are in report.json, and stays small. (The run's memory while
    /// writing it is measured by the benchmark, not here.)
    @Test func atThreeHundredThousandMissedThePageShowsEveryCountAndOnlyTheFirstRowsOfEach() throws {
        let types = ["DID_RENEW", "EXPIRED", "DID_FAIL_TO_RENEW", "CONSUMPTION_REQUEST"]
        let missed = try ReportList<RecoveryReport.Missed>()
        var timeline = ReportTimeline(start: Self.date("2026-11-20T00:00:00Z"), end: Self.date("2026-11-21T00:00:00Z"))
        for index in 0..<300_000 {
            let type = types[index % 7 == 0 ? 3 : index % 3]
            let signed = Self.date("2026-11-20T00:00:00Z").addingTimeInterval(Double(index % 86_400))
            missed.append(
                .init(
                    notificationUUID: "uuid-\(index)", notificationType: type, subtype: nil, signedDate: ReportTimeline.iso(signed),
                    originalTransactionId: "\(1_000_000 + index)", firstAttemptResult: "NO_RESPONSE", action: index % 10 == 0 ? "stale" : "applied"
                )
            )
            timeline.countMissed(at: signed, type: type)
            timeline.countFirstAttempt(at: signed, result: "NO_RESPONSE")
        }
        let rejected = try ReportList<RecoveryReport.Rejected>()
        for index in 0..<20_000 { rejected.append(.init(notificationUUID: "r-\(index)", originalTransactionId: nil, reason: index % 2 == 0 ? "bad_signature" : "wrong_bundle", detail: "<script>x</script>")) }
        let customers = try ReportList<RecoveryReport.CustomerChange>()
        for index in 0..<50_000 {
            let after = SubscriptionRecord(
                originalTransactionId: "\(index)", productId: "p", status: 1, expiresDate: nil, autoRenewStatus: 1, autoRenewProductId: nil,
                isInBillingRetry: nil, gracePeriodExpiresDate: nil, lastSignedDate: Self.date("2026-11-20T00:00:00Z")
            )
            customers.append(.init(originalTransactionId: "\(index)", before: nil, after: after))
        }
        var counts = RecoveryReport.Counts()
        counts.missed = 300_000
        counts.applied = 270_000
        counts.stale = 30_000
        counts.rejected = 20_000
        counts.fetched = 320_000
        let report = RecoveryReport(
            run: .init(id: "run-1", mode: .apply, environment: "Production", window: .init(start: timeline.start, end: timeline.end), startedAt: timeline.start, finishedAt: timeline.end, plan: nil),
            counts: counts, missed: missed, rejected: rejected, customers: customers,
            deliveryFailures: .init(byFirstAttemptResult: ["NO_RESPONSE": 300_000], byHourOfFirstAttempt: [:]), timeline: timeline
        )
        let html = report.html()
        let limits = HTMLLimits()
        #expect(html.utf8.count < 1_500_000, "\(html.utf8.count) bytes")
        #expect(html.contains("Recovered <strong>300,000 missed notifications</strong>"))
        // Counts by type, from the whole list.
        let expected = Dictionary(grouping: 0..<300_000) { types[$0 % 7 == 0 ? 3 : $0 % 3] }.mapValues(\.count)
        for (type, count) in expected { #expect(html.contains("<tr data-type=\"\(type)\" data-count=\"\(count)\">"), "\(type)") }
        // The first rows of each group, then how many more.
        let rows = html.components(separatedBy: "<td class=\"id\">uuid-").count - 1
        #expect(rows == types.count * limits.rowsPerGroup + limits.rowsPerList, "\(rows) rows of missed notifications (each type's first, and the refund requests)")
        for (_, count) in expected { #expect(html.contains("and \(HTMLPage.number(count - limits.rowsPerGroup)) more: report.json lists them all")) }
        #expect(html.contains("and \(HTMLPage.number(50_000 - limits.rowsPerList)) more"), "subscription changes")
        #expect(html.contains("<code>bad_signature</code>: 10,000"))
        // Escaped, never markup.
        #expect(!html.contains("<script>x</script>") && html.contains("&lt;script&gt;x&lt;/script&gt;"))
        #expect(html.components(separatedBy: "<g class=\"step\"").count - 1 == 24)
        #expect(html.contains("data-missed=\"300000\""))
    }

    static func captures(_ pattern: String, _ text: String) throws -> [(String, Int)] {
        let expression = try NSRegularExpression(pattern: pattern)
        return expression.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            guard let kind = Range(match.range(at: 1), in: text), let count = Range(match.range(at: 2), in: text) else { return nil }
            return (String(text[kind]), Int(text[count]) ?? 0)
        }
    }
}
