import Foundation
import RunResults

/// The refund requests (CONSUMPTION_REQUEST) a report lists, summed up for its verdict: how many
/// can still be answered, and the first deadline among them.
struct ConsumptionDeadlines {
    var answerable = 0
    var passed = 0
    var firstDeadline: String?
    let now: Date

    init(_ entries: some Sequence<RecoveryReport.Missed> = [], now: Date) {
        self.now = now
        for entry in entries { count(entry) }
    }

    /// Counts the entry if it is a refund request.
    mutating func count(_ entry: RecoveryReport.Missed) {
        guard entry.awaitsAnswer else { return }
        if Self.isPassed(entry, now: now) {
            passed += 1
        } else {
            answerable += 1
            // ISO 8601 in UTC: the text order is the time order.
            if let deadline = entry.answerBy, firstDeadline.map({ deadline < $0 }) ?? true { firstDeadline = deadline }
        }
    }

    /// Past its deadline at `now` (an entry without one is taken as passed: nothing says otherwise).
    static func isPassed(_ entry: RecoveryReport.Missed, now: Date) -> Bool {
        guard let deadline = entry.answerBy.flatMap(ReportTimeline.parse) else { return true }
        return deadline <= now
    }

    /// "2 still answerable, the first by …; 1 past its deadline."
    var sentence: String {
        var parts: [String] = []
        if answerable > 0 { parts.append("\(answerable) still answerable, the first by \(firstDeadline ?? "?")") }
        if passed > 0 { parts.append("\(passed) past \(passed == 1 ? "its" : "their") 12-hour deadline") }
        return parts.joined(separator: "; ") + "."
    }
}

extension RecoveryReport {
    /// When the report was made (the run's end): deadlines are judged at that time.
    var reportTime: Date { ReportTimeline.parse(run.finishedAt) ?? Date() }
}
