package import Foundation

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

        package init(start: String, end: String) {
            self.start = start
            self.end = end
        }
    }

    package var start: String
    package var end: String
    package var stepSeconds: Int
    package var steps: [Step]
    /// Failed first attempts and missed notifications dated outside the window (Apple's first
    /// attempt before the window's start, say): in no step.
    package var outsideFailedFirstAttempts = 0
    package var outsideMissed = 0
    /// The outages to shade; `detect-outage` sets its clusters, a run leaves nil and the chart
    /// shades `failureSpans`.
    package var outages: [Span]?

    /// The first step's start (the window's start rounded down to the step), the window's start
    /// and its end.
    private var origin: TimeInterval = 0
    private var beginning: TimeInterval = 0
    private var finish: TimeInterval = 0
    /// The same counts at a finer step (about a tenth of `stepSeconds`), for the close-up of an
    /// outage much shorter than the window; not in report.json.
    private var fineSeconds = 0
    private var fine: [Step] = []

    enum CodingKeys: String, CodingKey {
        case start, end, stepSeconds, steps, outsideFailedFirstAttempts, outsideMissed, outages
    }

    /// Equal when report.json would say the same (the finer counts aside).
    package static func == (left: Self, right: Self) -> Bool {
        (left.start, left.end, left.stepSeconds, left.steps) == (right.start, right.end, right.stepSeconds, right.steps)
            && (left.outsideFailedFirstAttempts, left.outsideMissed, left.outages) == (right.outsideFailedFirstAttempts, right.outsideMissed, right.outages)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(start)
        hasher.combine(stepSeconds)
        hasher.combine(steps)
    }

    /// The steps people read best, shortest first.
    package static let candidateSteps = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400, 172_800, 604_800]

    /// An hour when that gives 20 to 60 steps; otherwise the shortest step that gives at most 60
    /// (20 or more whenever the window is long enough for the shortest step, a minute). Steps
    /// start on whole multiples of the step, so the count is that of the aligned steps.
    package static func stepSeconds(start: Date, end: Date) -> Int {
        if (20...60).contains(stepCount(start: start, end: end, step: 3600)) { return 3600 }
        return candidateSteps.first { stepCount(start: start, end: end, step: $0) <= 60 } ?? candidateSteps.last!
    }

    static func stepCount(start: Date, end: Date, step: Int) -> Int {
        let first = (start.timeIntervalSince1970 / Double(step)).rounded(.down) * Double(step)
        return max(1, Int(((max(end.timeIntervalSince1970, start.timeIntervalSince1970 + 1) - first) / Double(step)).rounded(.up)))
    }

    /// Steps aligned to whole multiples of the step in UTC (whole hours for an hourly chart),
    /// from the one holding `start` to the one holding the last instant before `end`.
    package init(start: Date, end: Date) {
        let step = Self.stepSeconds(start: start, end: end)
        let first = (start.timeIntervalSince1970 / Double(step)).rounded(.down) * Double(step)
        let count = Self.stepCount(start: start, end: end, step: step)
        self.start = Self.iso(start)
        self.end = Self.iso(end)
        stepSeconds = step
        steps = (0..<count).map { Step(start: Self.iso(Date(timeIntervalSince1970: first + Double($0 * step)))) }
        origin = first
        beginning = start.timeIntervalSince1970
        finish = max(end.timeIntervalSince1970, beginning)
        fineSeconds = Self.candidateSteps.last { $0 <= step / 10 && step % $0 == 0 } ?? step
        let fineCount = max(1, Int(((finish - first) / Double(fineSeconds)).rounded(.up)))
        fine = (0..<fineCount).map { Step(start: Self.iso(Date(timeIntervalSince1970: first + Double($0 * fineSeconds)))) }
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        start = try container.decode(String.self, forKey: .start)
        end = try container.decode(String.self, forKey: .end)
        stepSeconds = try container.decode(Int.self, forKey: .stepSeconds)
        steps = try container.decode([Step].self, forKey: .steps)
        outsideFailedFirstAttempts = try container.decodeIfPresent(Int.self, forKey: .outsideFailedFirstAttempts) ?? 0
        outsideMissed = try container.decodeIfPresent(Int.self, forKey: .outsideMissed) ?? 0
        outages = try container.decodeIfPresent([Span].self, forKey: .outages)
        origin = steps.first.flatMap { Self.parse($0.start) }?.timeIntervalSince1970 ?? 0
        beginning = Self.parse(start)?.timeIntervalSince1970 ?? origin
        finish = Self.parse(end)?.timeIntervalSince1970 ?? origin
    }

    /// The step holding `date`, nil outside the window.
    package func stepIndex(of date: Date) -> Int? {
        let time = date.timeIntervalSince1970
        guard !steps.isEmpty, time >= beginning, time <= finish else { return nil }
        return min(steps.count - 1, Int((time - origin) / Double(stepSeconds)))
    }

    /// Counts a first delivery attempt; SUCCESS is not a failure and is not counted.
    package mutating func countFirstAttempt(at date: Date, result: String) {
        guard result != "SUCCESS" else { return }
        guard let index = stepIndex(of: date) else { return outsideFailedFirstAttempts += 1 }
        steps[index].failedFirstAttempts[result, default: 0] += 1
        if let fineIndex = fineIndex(of: date) { fine[fineIndex].failedFirstAttempts[result, default: 0] += 1 }
    }

    package mutating func countMissed(at date: Date, type: String) {
        guard let index = stepIndex(of: date) else { return outsideMissed += 1 }
        steps[index].missed[type.isEmpty ? "unknown" : type, default: 0] += 1
        if let fineIndex = fineIndex(of: date) { fine[fineIndex].missed[type.isEmpty ? "unknown" : type, default: 0] += 1 }
    }

    private func fineIndex(of date: Date) -> Int? {
        guard !fine.isEmpty else { return nil }
        return min(fine.count - 1, max(0, Int((date.timeIntervalSince1970 - origin) / Double(fineSeconds))))
    }

    /// The failed first attempts seen closer: when they all fall in less than a third of the
    /// window, a timeline of that stretch (and a tenth of it either side) at a finer step, with at
    /// most 60 steps; nil otherwise, or without the finer counts (a timeline read back from JSON).
    package func closeUp() -> ReportTimeline? {
        guard fineSeconds < stepSeconds,
            let first = fine.firstIndex(where: { $0.failedTotal > 0 }), let last = fine.lastIndex(where: { $0.failedTotal > 0 })
        else { return nil }
        let covered = Double((last - first + 1) * fineSeconds)
        guard covered * 3 < finish - origin else { return nil }
        let margin = max(1, (last - first + 1) / 10)
        let from = max(0, first - margin)
        let to = min(fine.count - 1, last + margin)
        var perStep = 1
        while (to - from + perStep) / perStep > 60 { perStep += 1 }
        var view = self
        view.stepSeconds = fineSeconds * perStep
        view.origin = origin + Double(from * fineSeconds)
        view.beginning = max(beginning, view.origin)
        view.finish = min(finish, origin + Double((to + 1) * fineSeconds))
        view.start = Self.iso(Date(timeIntervalSince1970: view.origin))
        view.end = Self.iso(Date(timeIntervalSince1970: view.finish))
        view.steps = stride(from: from, through: to, by: perStep).map { index in
            var step = Step(start: fine[index].start)
            for part in fine[index..<min(index + perStep, to + 1)] {
                step.failedFirstAttempts.merge(part.failedFirstAttempts, uniquingKeysWith: +)
                step.missed.merge(part.missed, uniquingKeysWith: +)
            }
            return step
        }
        view.outsideFailedFirstAttempts = 0
        view.outsideMissed = 0
        view.fine = []
        view.fineSeconds = view.stepSeconds
        return view
    }

    package var failedTotal: Int { steps.reduce(0) { $0 + $1.failedTotal } }
    package var missedTotal: Int { steps.reduce(0) { $0 + $1.missedTotal } }

    /// The window's totals: failed first attempts by result, missed notifications by type.
    package var failedByResult: [String: Int] { Self.totals(steps.map(\.failedFirstAttempts)) }
    package var missedByType: [String: Int] { Self.totals(steps.map(\.missed)) }

    /// Results and types in the order the chart stacks and its legend lists them: most first.
    package var results: [String] { Self.byCount(failedByResult) }
    package var types: [String] { Self.byCount(missedByType) }

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

    static func totals(_ maps: [[String: Int]]) -> [String: Int] {
        maps.reduce(into: [:]) { totals, map in totals.merge(map, uniquingKeysWith: +) }
    }

    package static func byCount(_ totals: [String: Int]) -> [String] {
        totals.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map(\.key)
    }

    package static func iso(_ date: Date) -> String { date.formatted(.iso8601) }
    package static func parse(_ text: String) -> Date? { try? Date(text, strategy: .iso8601) }
}
