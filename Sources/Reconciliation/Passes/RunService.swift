import ServiceLifecycle
import Synchronization

/// A reconciliation run as a swift-service-lifecycle `Service`: what `run`, `nightly`,
/// `consumption-requests` and `repair` hand to a `ServiceGroup`, beside the ledger's database
/// client (`demo` calls `run()` directly, a step at a time). A graceful shutdown (SIGTERM, SIGINT) asks the run to stop at its next safe
/// point (`StopRequest`: the batch in hand committed, the run's outcome recorded); the group shuts
/// the database client down only after this service has returned.
///
/// `run()` does not throw the run's failure into the group, where it would be wrapped and the
/// other services cancelled: it keeps the run's result or error for `result()`, and returns.
package final class RunService: Service, Sendable {
    /// What the run does.
    package enum Job: Sendable {
        /// Recover a window (pass 1), then repair the accounts it may have left wrong (pass 2).
        case recovery(ReconciliationRun.Request)
        /// Repair accounts from Apple's present state, without a window.
        case repair(ReconciliationRun.AccountChoice, mode: RunMode, concurrency: Int)
        /// Import the accounts an input names (`import`).
        /// `sandbox`: the app's Sandbox pair, asked about what Production does not know.
        case importAccounts(ImportInput, mode: RunMode, concurrency: Int, sandbox: ReconciliationRun.PairParts? = nil)
        /// Extend the renewal dates of the subscribers an outage hurt (`compensate`).
        case compensate(Compensation.Scope, mode: RunMode)
        /// Compare a random sample of the ledger's accounts with Apple, and mend them with `repair` (`audit`).
        case audit(sample: Int, repair: Bool, concurrency: Int)
    }

    package let reconciliation: ReconciliationRun
    package let job: Job
    private let stopRequested: @Sendable () -> Void
    private let outcome = Mutex<Result<RunResult, any Error>?>(nil)

    /// - Parameter stopRequested: told once when a graceful shutdown reaches the run (the CLI
    ///   says "stopping: finishing the batch in hand…").
    package init(_ reconciliation: ReconciliationRun, job: Job, stopRequested: @escaping @Sendable () -> Void = {}) {
        self.reconciliation = reconciliation
        self.job = job
        self.stopRequested = stopRequested
    }

    package func run() async throws {
        let reconciliation = reconciliation
        let job = job
        let stopRequested = stopRequested
        let result: Result<RunResult, any Error>
        do {
            result = .success(
                try await withGracefulShutdownHandler {
                    switch job {
                    case .recovery(let request): try await reconciliation.execute(request)
                    case .repair(let choice, let mode, let concurrency): try await reconciliation.repairAccounts(choice, mode: mode, concurrency: concurrency)
                    case .importAccounts(let input, let mode, let concurrency, let sandbox):
                        try await reconciliation.importAccounts(input, mode: mode, concurrency: concurrency, sandbox: sandbox)
                    case .compensate(let scope, let mode): try await reconciliation.compensate(scope, mode: mode)
                    case .audit(let sample, let repair, let concurrency): try await reconciliation.audit(sample: sample, repair: repair, concurrency: concurrency)
                    }
                } onGracefulShutdown: {
                    stopRequested()
                    reconciliation.stop.request()
                }
            )
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
    }

    /// The run's result, or why it failed. `CancellationError` when the service never ran to
    /// its end (the group was cancelled before it started).
    package func result() throws -> RunResult {
        guard let outcome = outcome.withLock({ $0 }) else { throw CancellationError() }
        return try outcome.get()
    }
}
