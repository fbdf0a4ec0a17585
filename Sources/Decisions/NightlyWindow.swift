package import Foundation
package import SignedData

/// The window a nightly run recovers: from the end of the last successful run's window, less an
/// overlap for Apple's late retries, to a few minutes before now (Apple may still be signing).
/// A pure decision: the last success and the clock in, the window (or why there is none) out.
package enum NightlyWindow {
    package static func choose(
        lastSuccessfulWindowEnd: Date?, firstStart: Date?, now: Date, overlap: TimeInterval, settle: TimeInterval,
        environment: AppStoreEnvironment
    ) throws -> OutageWindow {
        let end = now.addingTimeInterval(-settle)
        let start: Date
        if let lastEnd = lastSuccessfulWindowEnd {
            start = lastEnd.addingTimeInterval(-overlap)
        } else if let firstStart {
            start = firstStart
        } else {
            throw WindowError(
                "no successful run is recorded yet: give the first nightly run --start (for example the time the webhook went live), "
                    + "or --from-retention-limit to cover all the history Apple keeps"
            )
        }
        // After a long pause, never reach further back than the history keeps.
        let earliest = now.addingTimeInterval(-Double(OutageWindow.retentionDays(environment)) * 86_400 + 3600)
        return try OutageWindow(start: max(start, earliest), end: end, environment: environment, now: now)
    }
}
