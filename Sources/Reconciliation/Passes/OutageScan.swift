package import AppStoreServerAPI
import Decisions
package import Foundation
import SignedData

/// `detect-outage`'s work: pages Get Notification History with onlyFailures from `since` to now
/// (no further back than the environment's history keeps) and groups the failed first delivery
/// attempts into outages (`OutageDetection.clusters`). Reads no payload and writes nothing.
package struct OutageScan: Sendable {
    package typealias Result = OutageScanResult

    package let client: AppStoreServerAPIClient
    package let progress: any RunProgress

    package init(client: AppStoreServerAPIClient, progress: any RunProgress = NoProgress()) {
        self.client = client
        self.progress = progress
    }

    package func scan(since: Date, gap: TimeInterval, now: Date = Date()) async throws -> Result {
        let environment = client.configuration.environment
        let earliest = now.addingTimeInterval(-Double(OutageWindow.retentionDays(environment)) * 86_400 + 60)
        let start = max(since, earliest)
        let window = try OutageWindow(start: start, end: now, environment: environment, now: now)
        var failed: [OutageDetection.FailedAttempt] = []
        var undelivered = 0
        let request = NotificationHistoryRequest(startDate: window.startMilliseconds, endDate: window.endMilliseconds, onlyFailures: true)
        for try await page in client.notificationHistory(request) {
            undelivered += page.response.notificationHistory.count
            failed += page.response.notificationHistory.compactMap(OutageDetection.failedFirstAttempt)
            progress.update("undelivered notifications found: \(undelivered)", requests: client.counts.requests[.notificationHistory] ?? 0)
        }
        progress.finish()
        let outages = OutageDetection.clusters(failed, gap: gap)
        var timeline = ReportTimeline(start: window.start, end: window.end)
        for attempt in failed { timeline.countFirstAttempt(at: attempt.date, result: attempt.result) }
        timeline.outages = outages.map { ReportTimeline.Span(start: ReportTimeline.iso($0.firstFailure), end: ReportTimeline.iso($0.lastFailure)) }
        return Result(
            window: window, environment: environment, undelivered: undelivered, requests: client.counts.requests[.notificationHistory] ?? 0,
            outages: outages, clampedTo: since < earliest ? earliest : nil, timeline: timeline
        )
    }
}
