import Reports
import AppStoreServerAPI
import ArgumentParser
import Ledger
import Logging
import Reconciliation
import ServiceLifecycle
import SignedData

/// A run over several App Stores (apps and environments): each pair's run is a `RunService` of
/// its own (its own API client, so its own rate budget and retries), up to `concurrency` of them
/// at once, beside the one ledger's database client. One pair's failure is that pair's: the
/// others go on. SIGTERM and SIGINT ask every running pair to stop at its next safe point.
func runReconciliations(
    _ pairs: [ConfigurationOptions.Pair], label: String, concurrency: Int,
    adjust: @escaping (AppStoreServerAPIConfiguration) -> AppStoreServerAPIConfiguration = { $0 },
    job: (ConfigurationOptions.Pair) -> RunService.Job
) async throws -> [(pair: AppStorePair, result: Result<RunResult, any Error>)] {
    let databaseURL = try pairs[0].settings.databaseURL()
    let logger = Logger(label: "appstore-reconcile.\(label)")
    let database = LedgerDatabase.client(databaseURL, logger: logger)
    let store = LedgerStore(client: database, logger: logger)
    // A pair whose settings cannot be used (its key file, its roots) is that pair's failure.
    var services: [(AppStorePair, Result<RunService, any Error>)] = []
    for pair in pairs {
        let prefix = "\(pair.pair): "
        services.append((pair.pair, Result {
            let reconciliation = ReconciliationRun(
                client: AppStoreServerAPIClient(configuration: adjust(try pair.settings.apiConfiguration(warn: { printError(prefix + $0, level: .warning) })), logger: logger),
                verifier: try SignedDataVerifier(try pair.settings.verifierConfiguration()), store: store, databaseURL: databaseURL, logger: logger,
                events: { printError(prefix + $0.message, level: $0.level) }
            )
            return RunService(reconciliation, job: job(pair), stopRequested: { printError(prefix + "stopping: finishing the batch in hand…") })
        }))
    }
    let runnable = services.compactMap { try? $0.1.get() }
    try await runUntilDone(PairsService(runs: runnable, concurrency: concurrency), beside: database, logger: logger)
    return services.map { pair, service in (pair, Result { try service.get().result() }) }
}

/// Runs the pairs' services, at most `concurrency` at a time; each keeps its own result.
private struct PairsService: Service {
    let runs: [RunService]
    let concurrency: Int

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            var next = runs.makeIterator()
            for _ in 0..<max(1, concurrency) {
                guard let run = next.next() else { break }
                group.addTask { try? await run.run() }
            }
            while await group.next() != nil {
                guard let run = next.next() else { continue }
                group.addTask { try? await run.run() }
            }
        }
    }
}

extension ExitStatus {
    /// The order of seriousness a run over several pairs reports the worst of: interrupted (130),
    /// then a configuration error (78), an unexpected failure (1), a temporary one (75), a
    /// payload rejected (65), done with rejections or problems (3), success (0).
    static let seriousness: [Int32] = [interrupted, configuration, failure, temporaryFailure, payloadRejected, doneWithRejections, success]

    /// The most serious of these statuses (`seriousness`); an unlisted one counts as a failure.
    static func mostSerious(_ statuses: [Int32]) -> Int32 {
        statuses.min { rank($0) < rank($1) } ?? success
    }

    private static func rank(_ status: Int32) -> Int {
        seriousness.firstIndex(of: status) ?? seriousness.firstIndex(of: failure)!
    }
}

/// What the operator sees as a run over several pairs ends: each pair's report in
/// `DIR/<bundleId>/<environment>/`, `DIR/report.html` linking them, a line per pair, and the most
/// serious pair's exit status.
func conclude(
    _ results: [(pair: AppStorePair, result: Result<RunResult, any Error>)], reportDirectory: String?, dryRun: Bool, title: String,
    summary: (RecoveryReport) -> String
) throws {
    let directory = reportDirectory ?? ReportFiles.defaultDirectory(prefix: "appstore-reconcile-report", dryRun: dryRun)
    var entries: [DeploymentSummaryPage.Entry] = []
    var statuses: [Int32] = []
    for (pair, result) in results {
        switch result {
        case .success(let run):
            let status = ExitStatus.of(run.outcome)
            statuses.append(status)
            if run.ending == .stopped {
                entries.append(.init(pair: pair, outcome: run.outcome.rawValue, summary: FailureReport(RunStopped()).line, hasReport: false))
                printError("\(pair): \(FailureReport(RunStopped()).line)")
                continue
            }
            let report = RecoveryReport(run)
            let line = summary(report)
            do {
                try report.writeFiles(to: directory + "/" + pair.path)
            } catch {
                // This pair's report is lost, not the others' nor the summary.
                let failure = FailureReport(error)
                statuses.append(ExitStatus.of(failure.kind))
                entries.append(.init(pair: pair, outcome: run.outcome.rawValue, summary: line + " (report not written: \(failure.line))", hasReport: false))
                printError("\(pair): \(failure.line)", level: failure.level)
                continue
            }
            entries.append(.init(pair: pair, outcome: run.outcome.rawValue, summary: line, hasReport: true))
            print("\(pair): " + (run.dryRun ? "dry run: " : "done: ") + line)
            if run.problems.any { printError("\(pair): finished with problems: see \(directory)/\(pair.path)/report.html", level: .warning) }
        case .failure(let error):
            let failure = FailureReport(error)
            statuses.append(ExitStatus.of(failure.kind))
            entries.append(.init(pair: pair, outcome: "failed (\(failure.kind))", summary: failure.line, hasReport: false))
            printError("\(pair): \(failure.line)", level: failure.level)
        }
    }
    try ReportFiles.write(["report.html": DeploymentSummaryPage(title: title, entries: entries).html], to: directory)
    print("Report: \(directory)/report.html (each pair's in \(directory)/<bundleId>/<environment>/)")
    let status = ExitStatus.mostSerious(statuses)
    if status != ExitStatus.success { throw ExitCode(status) }
}
