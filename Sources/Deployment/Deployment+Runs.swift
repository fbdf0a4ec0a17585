package import AppStoreServerAPI
import Ledger
import Logging
package import Reconciliation
import Reports
import ServiceLifecycle
package import SignedData

/// How one pair's run talks to the operator: the command line's choice (a progress line or none,
/// its lines prefixed with the pair's name or not), the deployment's wiring.
package struct RunTelling: Sendable {
    package var progress: any RunProgress
    package var events: @Sendable (ReconciliationRun.Event) -> Void
    /// Told once when a graceful shutdown reaches the run.
    package var stopRequested: @Sendable () -> Void
    /// A warning about the pair's settings (a key file others can read).
    package var warn: @Sendable (String) -> Void

    package init(
        progress: any RunProgress = NoProgress(), events: @escaping @Sendable (ReconciliationRun.Event) -> Void = { _ in },
        stopRequested: @escaping @Sendable () -> Void = {}, warn: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.progress = progress
        self.events = events
        self.stopRequested = stopRequested
        self.warn = warn
    }
}

extension Deployment {
    /// How one pair's run ended: its result, or why it failed (its settings unusable, the run's error).
    package struct PairResult: Sendable {
        package var pair: AppStorePair
        package var result: Result<RunResult, any Error>
    }

    /// Runs `job` for every pair (N ≥ 1), as the one composition of a run: each pair's verifier
    /// and API client (its own rate budget and retries, `adjust`ed), one ledger store over one
    /// database client beside them in a `ServiceGroup`, up to `concurrency` pairs at once, and
    /// SIGTERM or SIGINT asking every running pair to stop at its next safe point. One pair's
    /// failure is that pair's: the others go on. The jobs are made first (`job` throwing ends
    /// the call before anything runs); when no pair's parts can be made, the database is not
    /// opened and each failure is returned.
    package func runReconciliations(
        label: String, concurrency: Int,
        adjust: @escaping (AppStoreServerAPIConfiguration) -> AppStoreServerAPIConfiguration = { $0 },
        telling: (Pair) -> RunTelling,
        job: (Pair) throws -> RunService.Job
    ) async throws -> [PairResult] {
        let jobs = try pairs.map(job)
        let logger = Logger(label: "appstore-reconcile.\(label)")
        // A pair whose settings cannot be used (its roots, its key file) is that pair's failure.
        let parts = zip(pairs, jobs).map { pair, job in
            let telling = telling(pair)
            return Result { () throws -> (verifier: SignedDataVerifier, client: AppStoreServerAPIClient, telling: RunTelling, job: RunService.Job) in
                let verifier = try pair.verifier()
                let client = try pair.apiClient(logger: logger, adjust: adjust, warn: telling.warn)
                return (verifier, client, telling, job)
            }
        }
        guard parts.contains(where: { (try? $0.get()) != nil }) else {
            return zip(pairs, parts).map { pair, made in PairResult(pair: pair.pair, result: .failure(made.failure!)) }
        }
        let databaseURL = try databaseURL()
        let database = LedgerDatabase.client(databaseURL, logger: logger)
        let store = LedgerStore(client: database, logger: logger)
        let services = zip(pairs, parts).map { pair, made in
            made.map { parts in
                var run = ReconciliationRun(
                    client: parts.client, verifier: parts.verifier, store: store, databaseURL: databaseURL, logger: logger,
                    progress: parts.telling.progress, events: parts.telling.events, writeMetricsFile: { try $0.write(to: $1) }
                )
                run.overdueAfter = pair.overdueAfter
                return RunService(run, job: parts.job, stopRequested: parts.telling.stopRequested)
            }
        }
        try await runUntilDone(PairsService(runs: services.compactMap { try? $0.get() }, concurrency: concurrency), beside: database, logger: logger)
        return zip(pairs, services).map { pair, service in PairResult(pair: pair.pair, result: Result { try service.get().result() }) }
    }
}

extension Result {
    /// The error of a failure; nil for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
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
