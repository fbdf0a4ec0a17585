package import AppStoreServerAPI
import Foundation
import Ledger
import LedgerSupport
import Decisions
package import SignedData

extension ReconciliationRun {
    /// Another pair's API client and verifier, beside the run's own (an import's Sandbox pair).
    package struct PairParts: Sendable {
        package var client: AppStoreServerAPIClient
        package var verifier: SignedDataVerifier

        package init(client: AppStoreServerAPIClient, verifier: SignedDataVerifier) {
            self.client = client
            self.verifier = verifier
        }
    }

    /// Imports the accounts `input` names (`CustomerImport`): under `run`'s lock and a row of
    /// `app_store.runs` of kind `repair` (an import repairs named accounts), unless dry. Its
    /// result has the import's lines (`imported`) and the accounts' repairs (pass 2). What the
    /// run's Production pair does not know is asked in `sandbox`, the app's Sandbox pair.
    package func importAccounts(_ input: ImportInput, mode: RunMode, concurrency: Int, sandbox: PairParts? = nil) async throws -> RunResult {
        try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
        let dryRun = mode == .dryRun
        let repair = CustomerRepair(client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: concurrency, stop: stop)
        let sandboxRepair = sandbox.map { CustomerRepair(client: $0.client, verifier: $0.verifier, store: store, logger: logger, concurrency: 1, stop: stop) }
        let importer = CustomerImport(repair: repair, sandbox: sandboxRepair, now: now)
        let importAll = { @Sendable () async throws -> RunResult in
            try await recorded(.repair, mode: mode, window: nil, shard: .whole) { result in
                defer { progress.finish() }
                let startedAt = now()
                let outcome = try await importer.run(input, dryRun: dryRun, runId: result.runId)
                result.imported = outcome.result
                if let repairs = outcome.repairs {
                    result.passTwo = PassTwoResult(repairs: repairs, startedAt: startedAt, finishedAt: now())
                }
                if outcome.result.stopped { result.ending = .stopped }
            }
        }
        if dryRun { return try await importAll() }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, pair: verifier.configuration.pair, kind: .repair) {
            let abandoned = try await store.abandonDeadRuns(pair: verifier.configuration.pair, kinds: RunLock.kinds(sharing: .repair), shard: nil)
            if abandoned > 0 { events(.abandonedDeadRuns(abandoned)) }
            return try await importAll()
        }
    }
}
