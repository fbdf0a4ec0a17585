import AppStoreServerAPI
import Ledger
import Logging
import Reconciliation
import SignedData

/// Runs `job` as a `RunService` wired to the configuration: the verifier, Apple's API client
/// (its configuration adjusted by `adjust`: a run's rate share and retries), the ledger's
/// database client beside it in one `ServiceGroup`, a progress line, and SIGTERM/SIGINT stopping
/// it gracefully. Every event the run tells is printed as its line for the operator.
func runReconciliation(
    _ settings: Settings, label: String, progress: Bool,
    adjust: (AppStoreServerAPIConfiguration) -> AppStoreServerAPIConfiguration = { $0 },
    job: RunService.Job
) async throws -> RunResult {
    let verifier = try SignedDataVerifier(try settings.verifierConfiguration())
    let apiConfiguration = adjust(try settings.apiConfiguration(warn: { printError($0, level: .warning) }))
    let databaseURL = try settings.databaseURL()
    let logger = Logger(label: "appstore-reconcile.\(label)")
    let database = LedgerDatabase.client(databaseURL, logger: logger)
    let reconciliation = ReconciliationRun(
        client: AppStoreServerAPIClient(configuration: apiConfiguration, logger: logger), verifier: verifier,
        store: LedgerStore(client: database, logger: logger), databaseURL: databaseURL, logger: logger,
        progress: ProgressLine(enabled: progress, writeLine: { printError($0) }),
        events: { printError($0.message, level: $0.level) }
    )
    let service = RunService(reconciliation, job: job, stopRequested: { printError("stopping: finishing the batch in hand…") })
    try await runUntilDone(service, beside: database, logger: logger)
    return try service.result()
}
