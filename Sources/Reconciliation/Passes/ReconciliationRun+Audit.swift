import AppStoreServerAPI
import Decisions
import Foundation
import Ledger
import LedgerModel
import SignedData

extension ReconciliationRun {
    /// `audit` for this run's pair (`LedgerAudit`). Without `repair` it holds no lock and writes
    /// nothing but its own row of `app_store.runs` (kind `audit`, recorded finished as it ends:
    /// serve's gauge reads its bound there); with `repair`, under `run`'s lock, recorded as any
    /// repair run is, and the differing accounts are written with Apple's answer.
    package func audit(sample: Int, repair: Bool, concurrency: Int) async throws -> RunResult {
        try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
        let pair = verifier.configuration.pair
        var repairPass = CustomerRepair(client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: concurrency, stop: stop)
        repairPass.overdueAfter = overdueAfter
        let auditor = LedgerAudit(repairPass: repairPass, store: store)
        let body = { @Sendable (result: inout RunResult) async throws -> Void in
            defer { progress.finish() }
            let startedAt = now()
            let found = try await auditor.run(sample: sample, repair: repair, runId: result.runId)
            result.passTwo = PassTwoResult(repairs: found.repairs, startedAt: startedAt, finishedAt: now())
            result.audited = found.audit
            if found.stopped { result.ending = .stopped }
        }
        guard repair else {
            let startedAt = now()
            var result = RunResult(
                kind: .audit, id: UUID(), mode: .dryRun, environment: pair.environment, bundleId: pair.bundleId, startedAt: startedAt, finishedAt: startedAt)
            try await body(&result)
            result.api = client.counts
            result.finishedAt = now()
            result.id = try await store.recordFinishedRun(
                kind: .audit, pair: pair, startedAt: startedAt, outcome: result.outcome,
                countsJSON: RecoveryReport.countsJSON(result.counts, audit: result.audited)
            )
            return result
        }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, pair: pair, kind: .audit) {
            let abandoned = try await store.abandonDeadRuns(pair: pair, kinds: RunLock.kinds(sharing: .audit), shard: nil)
            if abandoned > 0 { events(.abandonedDeadRuns(abandoned)) }
            return try await recorded(.audit, mode: .apply, window: nil, shard: .whole, body)
        }
    }

    /// The nightly's audit, after its passes and under its lock: `audit.sample` accounts, paced at
    /// `audit.maxShareOfRateLimit` of Apple's rate, what differs mended (a nightly writes), and its
    /// figures recorded in a row of kind `audit` of their own, whose bound serve's gauge reads.
    /// nil when stopped on request.
    func nightlyAudit(_ audit: NightlyAudit, runId: UUID?) async throws -> LedgerAuditReport? {
        let pair = verifier.configuration.pair
        let rates = client.configuration.requestsPerSecond
        let pace = audit.requestsPerSecond(statuses: rates[.subscriptionStatuses] ?? 50, transactionHistory: rates[.transactionHistory] ?? 50)
        var repairPass = CustomerRepair(client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: 1, stop: stop)
        repairPass.overdueAfter = overdueAfter
        let auditor = LedgerAudit(repairPass: repairPass, store: store, pace: RateLimiter(requestsPerSecond: pace, clock: client.configuration.clock))
        let startedAt = now()
        let before = client.counts
        let found = try await auditor.run(sample: audit.sample, repair: true, runId: runId)
        defer { progress.finish() }
        guard !found.stopped else { return nil }
        var counts = PassTwoResult(repairs: found.repairs, startedAt: startedAt, finishedAt: now()).counts
        counts.rateLimited = client.counts.rateLimited - before.rateLimited
        _ = try await store.recordFinishedRun(
            kind: .audit, pair: pair, startedAt: startedAt, outcome: found.audit.cutShort || !found.audit.unknownToApple.isEmpty ? .succeededWithRejections : .succeeded,
            countsJSON: RecoveryReport.countsJSON(counts, audit: found.audit)
        )
        return found.audit
    }
}
