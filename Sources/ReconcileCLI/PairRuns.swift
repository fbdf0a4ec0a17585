import AppStoreServerAPI
import Deployment
import Logging
import Reconciliation
import SignedData

/// How a command shows a run over the deployment's pairs, decided once from the deployment. One
/// pair is shown as a one-app run always was (an interface: scripts read it): a progress line,
/// lines without the pair's name, the report in --report-dir itself, the run's failure the
/// command's. Several are side by side: each line prefixed with its pair, each report in
/// `DIR/<bundleId>/<environment>/` and `DIR/report.html` linking them, no progress line.
enum RunLayout: Sendable {
    case onePair
    case sideBySide(count: Int)

    init(_ deployment: Deployment) {
        switch deployment.pairs.count {
        case 1: self = .onePair
        case let count: self = .sideBySide(count: count)
        }
    }

    /// What the pair's lines start with.
    func prefix(_ pair: AppStorePair) -> String {
        switch self {
        case .onePair: ""
        case .sideBySide: "\(pair): "
        }
    }

    /// How the pair's run talks to the operator: its events and warnings as lines on standard
    /// error, a progress line when there is one pair and `progress` is wanted.
    func telling(_ pair: AppStorePair, progress: Bool) -> RunTelling {
        let prefix = prefix(pair)
        let showsProgress: Bool = if case .onePair = self { progress } else { false }
        return RunTelling(
            progress: ProgressLine(enabled: showsProgress, writeLine: { printError($0) }),
            events: { printError(prefix + $0.message, level: $0.level) },
            stopRequested: { printError(prefix + "stopping: finishing the batch in hand…") },
            warn: { printError(prefix + $0, level: .warning) }
        )
    }
}

extension Deployment {
    /// Runs `job` for every pair (`Deployment.runReconciliations`) as `layout` shows them.
    func runReconciliations(
        label: String, layout: RunLayout, progress: Bool, concurrency: Int,
        adjust: @escaping (AppStoreServerAPIConfiguration) -> AppStoreServerAPIConfiguration = { $0 },
        job: (Deployment.Pair) throws -> RunService.Job
    ) async throws -> [Deployment.PairResult] {
        try await runReconciliations(
            label: label, concurrency: concurrency, adjust: adjust, telling: { layout.telling($0.pair, progress: progress) }, job: job
        )
    }
}
