import AppStoreServerAPI
import Logging
import Reconciliation
import SignedData

/// The run service wired to the configuration: the verifier, Apple's API client (its
/// configuration adjusted by `adjust`: a run's rate share and retries), the ledger, a progress
/// line, and SIGTERM/SIGINT stopping it gracefully (`withGracefulShutdown`). Every event the run
/// tells is printed as its line for the operator.
func withReconciliationRun<Result: Sendable>(
    _ settings: Settings, label: String, progress: Bool,
    adjust: (AppStoreServerAPIConfiguration) -> AppStoreServerAPIConfiguration = { $0 },
    _ body: @escaping @Sendable (ReconciliationRun) async throws -> Result
) async throws -> Result {
    let verifier = try SignedDataVerifier(try settings.verifierConfiguration())
    let apiConfiguration = adjust(try settings.apiConfiguration(warn: { printError($0, level: .warning) }))
    let databaseURL = try settings.databaseURL()
    let logger = Logger(label: "appstore-reconcile.\(label)")
    let client = AppStoreServerAPIClient(configuration: apiConfiguration, logger: logger)
    let progressLine = ProgressLine(enabled: progress, writeLine: { printError($0) })
    return try await withGracefulShutdown(databaseURL: databaseURL, logger: logger) { store, stop in
        try await body(
            ReconciliationRun(
                client: client, verifier: verifier, store: store, databaseURL: databaseURL, logger: logger, progress: progressLine, stop: stop,
                events: { printError($0.message, level: $0.level) }
            )
        )
    }
}
