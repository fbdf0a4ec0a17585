import Decisions
import Foundation
import Ledger
import LedgerModel
import SignedData

extension ReconciliationRun {
    /// `compensate` for this run's pair (`Compensation`): a row of `app_store.runs` of kind
    /// `compensate` unless dry; for a window, under `run`'s lock, so that it does not read a
    /// window an unsharded run is recovering.
    package func compensate(_ scope: Compensation.Scope, mode: RunMode) async throws -> RunResult {
        try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
        let pair = verifier.configuration.pair
        let recovery = NotificationRecovery(client: client, verifier: verifier, store: store, logger: logger, progress: progress, stop: stop, now: now)
        let (environment, now) = (pair.environment, now)
        let compensation = Compensation(
            client: client, store: store, pair: pair, logger: logger, stop: stop, now: now,
            recordMassNotifications: { since, runId in
                // A minute before the request: Apple's clock and ours.
                let window = try OutageWindow(start: since.addingTimeInterval(-60), end: now(), environment: environment, now: now())
                _ = try await recovery.run(.init(window: window, runId: runId, checkpoints: false, onlyTypes: [.renewalExtension]))
            }
        )
        let compensateAll = { @Sendable () async throws -> RunResult in
            try await recorded(.compensate, mode: mode, window: nil, shard: .whole) { result in
                defer { progress.finish() }
                let outcome = try await compensation.run(scope, dryRun: mode == .dryRun, runId: result.runId)
                result.compensated = outcome
                if outcome.stopped { result.ending = .stopped }
            }
        }
        // A dry run writes nothing. The mass remedy follows Apple for hours or days: it holds no lock
        // (its requests are idempotent by identifier, and it reads no window), so that nightly runs go on.
        if mode == .dryRun { return try await compensateAll() }
        if case .allActive = scope { return try await compensateAll() }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, pair: pair, kind: .compensate) {
            let abandoned = try await store.abandonDeadRuns(pair: pair, kinds: RunLock.kinds(sharing: .compensate), shard: nil)
            if abandoned > 0 { events(.abandonedDeadRuns(abandoned)) }
            return try await compensateAll()
        }
    }
}
