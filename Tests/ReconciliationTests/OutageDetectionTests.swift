@testable import Decisions
import Foundation
import Reconciliation
import Testing

/// `detect-outage`'s decision, without I/O: failed first attempts in, outage windows out.
@Suite("Outage detection, without I/O")
struct OutageDetectionTests {
    @Test func failedFirstAttemptsClusterByGap() {
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        let attempts = [0, 60, 600, 1_200, 9_000, 9_100].map { OutageDetection.FailedAttempt(date: base.addingTimeInterval(Double($0)), result: $0 < 1000 ? "NO_RESPONSE" : "TIMED_OUT") }
        let outages = OutageDetection.clusters(attempts.reversed(), gap: 1_800)
        #expect(outages.count == 2)
        #expect(outages[0].notifications == 4 && outages[0].byResult == ["NO_RESPONSE": 3, "TIMED_OUT": 1])
        #expect(outages[0].recoveryStart <= base.addingTimeInterval(-600) && outages[0].recoveryEnd >= base.addingTimeInterval(1_800))
        #expect(outages[1].firstFailure == base.addingTimeInterval(9_000) && outages[1].notifications == 2)
        #expect(OutageDetection.parseDuration("7d") == 604_800 && OutageDetection.parseDuration("90m") == 5_400 && OutageDetection.parseDuration("x") == nil)
    }
}
