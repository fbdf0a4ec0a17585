import Foundation

/// The window of a run (or of `detect-outage`'s scan) cut into 20 to 60 equal steps, with what
/// happened in each: Apple's failed first send attempts by `sendAttemptResult`, and the missed
/// notifications by `notificationType`. report.html draws it as its chart; report.json carries it
/// as `timeline`. Small whatever the run: a few counters per step.
package struct ReportTimeline: Sendable, Codable, Hashable {
    package struct Step: Sendable, Codable, Hashable {
        /// The step's start, ISO 8601 UTC; it lasts `stepSeconds`.
        package var start: String
        /// Failed first delivery attempts (any `sendAttemptResult` but SUCCESS) in the step, by result.
        package var failedFirstAttempts: [String: Int] = [:]
        /// Missed notifications (applied or stale) whose first attempt (or, without one, whose
        /// signedDate) falls in the step, by notificationType.
        package var missed: [String: Int] = [:]

        package var failedTotal: Int { failedFirstAttempts.values.reduce(0, +) }
        package var missedTotal: Int { missed.values.reduce(0, +) }
    }

    /// A stretch to shade: an outage, as `detect-outage` found it or as the run's failed first
    /// attempts show it (steps with failures less than `shadingGap` apart).
    package struct Span: Sendable, Codable, Hashable {
        package var start: String
        package var end: String
    }

    package var start: String
    package var end: String
    package var stepSeconds: Int
    package var steps: [Step]
    /// Counted events dated outside the window (Apple's first attempt before the window's start,
    /// say): in no step.
    package var outside = 0
    /// The outages to shade; `detect-outage` sets its clusters, a run leaves nil and the chart
    /// shades `failureSpans`.
    package var outages: [Span]?

    private var origin: TimeInterval = 0
    private var finish: TimeInterval = 0

    enum CodingKeys: String, CodingKey {
        case start, end, stepSeconds, steps, outside, outages
    }

    /// The steps people read best, shortest first.
    package static let candidateSteps = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400, 172_800, 604_800]

    /// An hour when that gives 20 to 60 steps; otherwise the shortest step that gives at most 60
    /// (20 or more whenever the window is long enough for the shortest step, a minute).
    package static func stepSeconds(for duration: TimeInterval) -> Int {
        if (20...60).contains(Int((duration / 3600).rounded(.up))) { return 3600 }
        return candidateSteps.first { (duration / Double($0)).rounded(.up) <= 60 } ?? candidateSteps.last!
    }

    /// Steps aligned to whole multiples of the step in UTC (whole hours for an hourly chart),
    /// from the one holding `start` to the one holding the last instant before `end`.
    package init(start: Date, end: Date) {
        let duration = max(end.timeIntervalSince(start), 1)
        let step = Self.stepSeconds(for: duration)
        let first = (start.timeIntervalSince1970 / Double(step)).rounded(.down) * Double(step)
        let count = max(1, Int(((end.timeIntervalSince1970 - first) / Double(step)).rounded(.up)))
        self.start = Self.iso(start)
        self.end = Self.iso(end)
        stepSeconds = step
        steps = (0..<count).map { Step(start: Self.iso(Date(timeIntervalSince1970: first + Double($0 * step)))) }
        origin = first
        finish = end.timeIntervalSince1970
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        start = try container.decode(String.self, forKey: .start)
        end = try container.decode(String.self, forKey: .end)
        stepSeconds = try container.decode(Int.self, forKey: .stepSeconds)
        steps = try container.decode([Step].self, forKey: .steps)
        outside = try container.decodeIfPresent(Int.self, forKey: .outside) ?? 0
        outages = try container.decodeIfPresent([Span].self, forKey: .outages)
        origin = steps.first.flatMap { Self.parse($0.start) }?.timeIntervalSince1970 ?? 0
        finish = Self.parse(end)?.timeIntervalSince1970 ?? origin
    }

    /// The step holding `date`, nil outside the window.
    package func stepIndex(of date: Date) -> Int? {
        let time = date.timeIntervalSince1970
        guard time >= origin, time <= finish else { return nil }
        return min(steps.count - 1, Int((time - origin) / Double(stepSeconds)))
    }

    /// Counts a first delivery attempt; SUCCESS is not a failure and is not counted.
    package mutating func countFirstAttempt(at date: Date, result: String) {
        guard result != "SUCCESS" else { return }
        guard let index = stepIndex(of: date) else { return outside += 1 }
        steps[index].failedFirstAttempts[result, default: 0] += 1
    }

    package mutating func countMissed(at date: Date, type: String) {
        guard let index = stepIndex(of: date) else { return outside += 1 }
        steps[index].missed[type.isEmpty ? "unknown" : type, default: 0] += 1
    }

    package var failedTotal: Int { steps.reduce(0) { $0 + $1.failedTotal } }
    package var missedTotal: Int { steps.reduce(0) { $0 + $1.missedTotal } }

    /// Results and types in the order the chart stacks and its legend lists them: most first.
    package var results: [String] { Self.byCount(steps.map(\.failedFirstAttempts)) }
    package var types: [String] { Self.byCount(steps.map(\.missed)) }

    /// The run's outages as its failed first attempts show them: runs of steps with failures,
    /// joined across quiet stretches shorter than `gap`.
    package func failureSpans(gap: TimeInterval = 3600) -> [Span] {
        var spans: [(first: Int, last: Int)] = []
        let joinable = max(1, Int((gap / Double(stepSeconds)).rounded(.down)))
        for (index, step) in steps.enumerated() where step.failedTotal > 0 {
            if let last = spans.last, index - last.last <= joinable {
                spans[spans.count - 1].last = index
            } else {
                spans.append((index, index))
            }
        }
        return spans.map { span in
            let end = origin + Double((span.last + 1) * stepSeconds)
            return Span(start: steps[span.first].start, end: Self.iso(Date(timeIntervalSince1970: min(end, finish))))
        }
    }

    static func byCount(_ maps: [[String: Int]]) -> [String] {
        var totals: [String: Int] = [:]
        for map in maps { for (key, value) in map { totals[key, default: 0] += value } }
        return totals.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map(\.key)
    }

    static func iso(_ date: Date) -> String { date.formatted(.iso8601) }
    static func parse(_ text: String) -> Date? { try? Date(text, strategy: .iso8601) }
}
