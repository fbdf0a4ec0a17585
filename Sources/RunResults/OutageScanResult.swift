package import Decisions
package import Foundation
package import SignedData

/// What `detect-outage` found: the failed first delivery attempts grouped into outages.
package struct OutageScanResult: Sendable {
    package var window: OutageWindow
    package var environment: AppStoreEnvironment
    /// Notifications Apple has not delivered yet.
    package var undelivered: Int
    /// Requests made to Get Notification History.
    package var requests: Int
    package var outages: [OutageDetection.DetectedOutage]
    /// When `since` lay beyond what history keeps, where the scan started instead.
    package var clampedTo: Date?
    /// The failed first attempts by time step, the outages shaded: report.html's chart.
    package var timeline: ReportTimeline

    package init(
        window: OutageWindow, environment: AppStoreEnvironment, undelivered: Int, requests: Int, outages: [OutageDetection.DetectedOutage],
        clampedTo: Date?, timeline: ReportTimeline
    ) {
        self.window = window
        self.environment = environment
        self.undelivered = undelivered
        self.requests = requests
        self.outages = outages
        self.clampedTo = clampedTo
        self.timeline = timeline
    }
}
