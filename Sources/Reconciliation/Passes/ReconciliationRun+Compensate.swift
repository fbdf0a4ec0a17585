import Decisions
import Foundation
import Ledger
import LedgerModel
import SignedData

extension ReconciliationRun {
    /// `compensate` for this run's pair (`Compensation`): under a lock of its own and a row of
    /// `app_store.runs` of kind `compensate`, unless dry.
    package func compensate(_ scope: Compensation.Scope, mode: RunMode) async throws -> RunResult {
        try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
        let pair = verifier.configuration.pair
        let compensation = Compensation(client: client, store: store, pair: pair, logger: logger, stop: stop, now: now)
        let compensateAll = { @Sendable () async throws -> RunResult in
            try await recorded(.compensate, mode: mode, window: nil, shard: .whole) { result in
                defer { progress.finish() }
                let outcome = try await compensation.run(scope, dryRun: mode == .dryRun, runId: result.runId)
                result.compensated = outcome
                if outcome.stopped { result.ending = .stopped }
            }
        }
        if mode == .dryRun { return try await compensateAll() }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, pair: pair, kind: .compensate) {
            let abandoned = try await store.abandonDeadRuns(pair: pair, kinds: RunLock.kinds(sharing: .compensate), shard: nil)
            if abandoned > 0 { events(.abandonedDeadRuns(abandoned)) }
            return try await compensateAll()
        }
    }
}
