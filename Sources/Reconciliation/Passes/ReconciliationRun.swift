package import AppStoreServerAPI
import Decisions
package import Foundation
package import Ledger
package import Logging
package import SignedData
import Synchronization

/// One reconciliation run, from the run lock to its outcome: the service `run`, `nightly`,
/// `repair` and `demo` all call, and the library's tests too, so that what is tested is what runs.
///
/// A run that writes takes the run lock (per shard), marks runs that died while holding it
/// abandoned, records itself in `app_store.runs`, starts afresh or resumes from the checkpoints
/// an unfinished run of the same window left, recovers the window (pass 1), waits for the other
/// shards' pass 1, repairs the accounts that may still be wrong (pass 2), and records how it
/// ended, however it ended. A dry run does the same reading and writes nothing, and takes no lock.
/// The metrics file, when asked for, is written at the end whatever the end.
///
/// What a person should hear about on the way is told to `events` as values; the caller decides
/// how to say it.
package struct ReconciliationRun: Sendable {
    package let client: AppStoreServerAPIClient
    package let verifier: SignedDataVerifier
    package let store: LedgerStore
    /// For the run lock's own connection.
    package let databaseURL: DatabaseURL
    package let logger: Logger
    package let progress: any RunProgress
    package let stop: StopRequest
    package let events: @Sendable (Event) -> Void
    /// The present, injected for tests.
    package let now: @Sendable () -> Date
    /// Writes a run's figures to its metrics file (`Request.metricsFile`) as it ends: the
    /// renderer is the reports' (the composition root passes `RunMetrics.write`).
    package let writeMetricsFile: @Sendable (RunMetrics, String) throws -> Void
    /// The configuration's `overdueAfter`: how long past its due time a notification Apple owes
    /// selects the account for pass 2 (`Overdue`).
    package var overdueAfter: TimeInterval = GapRules.defaultOverdueAfter

    package init(
        client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, databaseURL: DatabaseURL, logger: Logger,
        progress: any RunProgress = NoProgress(), stop: StopRequest = StopRequest(),
        events: @escaping @Sendable (Event) -> Void = { _ in }, now: @escaping @Sendable () -> Date = { Date() },
        writeMetricsFile: @escaping @Sendable (RunMetrics, String) throws -> Void = { _, _ in }
    ) {
        self.writeMetricsFile = writeMetricsFile
        self.client = client
        self.verifier = verifier
        self.store = store
        self.databaseURL = databaseURL
        self.logger = logger
        self.progress = progress
        self.stop = stop
        self.events = events
        self.now = now
    }

    var environment: AppStoreEnvironment { verifier.configuration.environment }

    // MARK: A window

    /// Runs the request and returns its result: a finished run's, or a stopped one's (stopped on
    /// request: nothing committed is lost, and running it again finishes it). Throws why a run
    /// failed.
    package func execute(_ request: Request) async throws -> RunResult {
        let startedAt = now()
        let figures = LedgerFigures()
        do {
            // A server that cannot be reached (or refuses the credentials) fails the run here,
            // where the metrics still say so, and before the pool is asked for anything.
            try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
            let result: RunResult
            do {
                result = try await lockedRun(request)
            } catch {
                if request.metricsFile != nil { await figures.read(from: store, kind: request.kind, pair: verifier.configuration.pair) }
                throw error
            }
            if request.metricsFile != nil { await figures.read(from: store, kind: request.kind, pair: verifier.configuration.pair) }
            writeMetrics(request, outcome: result.outcome, startedAt: startedAt, counts: result.counts, figures: figures, redelivery: result.redelivery, answers: result.answers)
            return result
        } catch {
            writeMetrics(request, outcome: RunOutcome(endingWith: error), startedAt: startedAt, counts: nil, figures: figures)
            throw error
        }
    }

    /// Chooses the window and recovers it: under the run lock unless dry.
    func lockedRun(_ request: Request) async throws -> RunResult {
        // A facts file that does not parse or lacks a column stops the run before anything is
        // recorded or sent (RefundFactsError: exit 78).
        if let answering = request.answering { try await store.check(answering.query, pair: verifier.configuration.pair, timeout: answering.timeout) }
        let window = try await choose(request)
        let shard = request.shard
        events(.recovering(window: window, environment: environment, passOne: shard.isWhole ? nil : shard.subWindow(of: window), shard: shard, dryRun: request.dryRun))
        if request.dryRun { return try await recordedRun(request, window: window) }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, pair: verifier.configuration.pair, kind: request.kind, shardIndex: shard.isWhole ? nil : shard.index) {
            // Runs under this lock still recorded as running died: the lock is ours.
            let abandoned = try await store.abandonDeadRuns(pair: verifier.configuration.pair, kinds: RunLock.kinds(sharing: request.kind), shard: shard.isWhole ? nil : shard.description)
            if abandoned > 0 { events(.abandonedDeadRuns(abandoned)) }
            return try await recordedRun(request, window: window)
        }
    }

    /// The window the request asks for.
    func choose(_ request: Request) async throws -> OutageWindow {
        let present = now()
        switch request.window {
        case .fixed(let start, let end):
            do {
                return try OutageWindow(start: start, end: end, environment: environment, now: present)
            } catch let error as WindowError where !request.dryRun && start < end {
                // An unfinished run of this very window, whose start Apple's limit overtook since
                // it began: resumed as the first attempt would have gone on (clamped, with a
                // warning), not refused.
                let resumable = try OutageWindow(start: start, end: end, environment: environment, now: present, resuming: true)
                let scope = NotificationRecovery.Options(window: resumable, onlyFailures: request.onlyFailures, shard: request.shard).checkpointScope(verifier.configuration.pair)
                guard !request.fresh, try await !store.resumableCheckpoints(in: scope).isEmpty else { throw error }
                return resumable
            }
        case .nightly(let firstStart, let overlap, let settle):
            // Only nightly runs move the start: a manual run of some other window says nothing
            // about the time since the last nightly one.
            let window = try NightlyWindow.choose(
                lastSuccessfulWindowEnd: try await store.lastSuccessfulRun(kind: request.kind, pair: verifier.configuration.pair)?.windowEnd, firstStart: firstStart, now: present,
                overlap: overlap, settle: settle, environment: environment
            )
            // A nightly run that died left checkpoints for its window: finish that window (same
            // start, its end) rather than start over; the next night continues from it.
            if !request.fresh,
                let unfinished = try await store.unfinishedWindow(kind: request.kind, pair: verifier.configuration.pair, shard: request.shard.description),
                unfinished.start.unixMilliseconds == window.start.unixMilliseconds, unfinished.end <= window.end
            {
                events(.resumingUnfinishedNightlyWindow)
                return try OutageWindow(start: unfinished.start, end: unfinished.end, environment: environment, now: present)
            }
            return window
        }
    }

    /// Both passes under one row of `app_store.runs` (none in a dry run), then the re-delivery.
    func recordedRun(_ request: Request, window: OutageWindow) async throws -> RunResult {
        let shard = request.shard
        let scope = NotificationRecovery.Options(window: window, onlyFailures: request.onlyFailures, shard: shard).checkpointScope(verifier.configuration.pair)
        let result = try await recorded(request.kind, mode: request.mode, window: window, shard: shard) { result in
            let options = NotificationRecovery.Options(
                window: window, dryRun: request.dryRun, onlyFailures: request.onlyFailures, runId: result.runId, shard: shard,
                deliverTo: request.deliverTo?.key, onlyTypes: request.onlyTypes
            )
            if request.fresh, !request.dryRun { try await store.clearCheckpoints(in: scope, keepingPassOne: false) }
            let recovery = NotificationRecovery(client: client, verifier: verifier, store: store, logger: logger, progress: progress, stop: stop, now: now)
            let passOne = try await recovery.run(options)
            result.passOne = passOne
            if let resumed = passOne.resumed { events(.resumed(resumed)) }
            guard !passOne.stopped else {
                result.ending = .stopped
                return
            }
            if let settings = request.answering {
                let answering = RefundAnswering(client: client, store: store, pair: verifier.configuration.pair, logger: logger, stop: stop, now: now)
                let answers = try await answering.run(settings, dryRun: request.dryRun, runId: result.runId, passOne: passOne)
                result.answers = answers
                guard !answers.stopped else {
                    result.ending = .stopped
                    return
                }
            }
            if request.repair {
                guard let passTwo = try await passTwo(request, window: window, after: passOne) else {
                    result.ending = .stopped
                    return
                }
                result.passTwo = passTwo
            }
            // One audit per App Store: a sharded nightly's first shard audits, the others do not.
            if let audit = request.audit, audit.sample > 0, !request.dryRun, request.shard.index == 0 {
                guard let audited = try await nightlyAudit(audit, runId: result.runId) else {
                    result.ending = .stopped
                    return
                }
                result.audited = audited
            }
            if let target = request.deliverTo {
                let redelivery = try await redeliver(to: target, request: request, wouldRecord: passOne.overlay.wouldRecord)
                result.redelivery = redelivery
                // Stopped while delivering: what is left stays pending for the rerun.
                if redelivery.stopped {
                    result.ending = .stopped
                    return
                }
            }
        }
        // Finished and recorded so: the next run of this window starts afresh (pass 1's mark
        // stays for the other shards). A stopped run keeps its checkpoints for the rerun.
        if result.ending == .finished, !request.dryRun { try await store.clearCheckpoints(in: scope, keepingPassOne: true) }
        return result
    }

    /// Pass 2, after the other shards' pass 1; nil when stopped on request.
    func passTwo(_ request: Request, window: OutageWindow, after passOne: PassOneResult) async throws -> PassTwoResult? {
        var repair = CustomerRepair(
            client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: request.repairConcurrency, stop: stop
        )
        repair.overdueAfter = overdueAfter
        defer { progress.finish() }
        do {
            if !request.shard.isWhole, !request.dryRun { try await waitForOtherShards(request, window: window) }
            // A large pass 1 into a young ledger leaves the planner without statistics for
            // pass 2's reads (PlannerStatistics).
            if !request.dryRun { await store.refreshPlannerStatistics(written: passOne.counts.applied) }
            let startedAt = now()
            let repairs = try await repair.afterRecovery(passOne, window: window, dryRun: request.dryRun, shard: request.shard, now: startedAt)
            return PassTwoResult(repairs: repairs, startedAt: startedAt, finishedAt: now())
        } catch is RunStopped {
            return nil
        }
    }

    /// Runs `body` under a row of `app_store.runs` (none in a dry run), and records how it
    /// ended: the result's outcome and counts, or why it failed. `body` fills in the result.
    func recorded(
        _ kind: RunKind, mode: RunMode, window: OutageWindow?, shard: Shard, _ body: (inout RunResult) async throws -> Void
    ) async throws -> RunResult {
        let startedAt = now()
        let runId = mode == .dryRun
            ? nil
            : try await store.startRun(
                kind: kind, pair: verifier.configuration.pair, windowStart: window?.start, windowEnd: window?.end,
                shard: shard.isWhole ? nil : shard.description
            )
        var result = RunResult(
            kind: kind, id: runId ?? UUID(), mode: mode, environment: environment, bundleId: verifier.configuration.pair.bundleId, shard: shard,
            startedAt: startedAt, finishedAt: startedAt)
        do {
            try await body(&result)
            result.api = client.counts
            result.finishedAt = now()
            if let runId { try await store.finishRun(runId, outcome: result.outcome, countsJSON: RecoveryReport.countsJSON(result.counts, audit: result.audited)) }
            return result
        } catch {
            progress.finish()
            if let runId { try? await store.finishRun(runId, outcome: RunOutcome(endingWith: error), countsJSON: "{}") }
            throw error
        }
    }

    /// Re-delivers what is pending for the target, what this run recorded included; a dry run
    /// lists what it would deliver and sends nothing.
    func redeliver(to target: DeliveryTarget, request: ReconciliationRun.Request, wouldRecord: [(uuid: String, signedDate: Date)]) async throws -> RedeliverySummary {
        let redelivery = NotificationRedelivery(store: store, target: target, policy: request.deliveryPolicy, logger: logger, stop: stop)
        if request.dryRun { return try await redelivery.wouldDeliver(adding: wouldRecord) }
        events(.redelivering(target: target.description, pending: try await store.pendingDeliveryCount(to: target.key)))
        do {
            return try await redelivery.deliverPending()
        } catch is DeliveryInProgress {
            events(.redeliveryBusy(target: target.description))
            var summary = RedeliverySummary(target: target.description)
            summary.pending = try await store.pendingDeliveryCount(to: target.key)
            summary.leftToAnotherDeliverer = true
            return summary
        }
    }

    /// Pass 2 of a shard repairs customers that any shard's pass 1 may have recovered: it waits
    /// until every shard of the window has recorded its pass 1 done (or `shardWait` passes).
    func waitForOtherShards(_ request: Request, window: OutageWindow) async throws {
        let shard = request.shard
        let all = Set((0..<shard.count).map { "\($0)/\(shard.count)" })
        let deadline = ContinuousClock.now + request.shardWait
        var announced = false
        while true {
            let done = try await store.shardsWithPassOneDone(
                pair: verifier.configuration.pair, windowStart: window.requestedStart, windowEnd: window.end, onlyFailures: request.onlyFailures
            )
            let waiting = all.subtracting(done).sorted()
            if waiting.isEmpty { return }
            if ContinuousClock.now >= deadline {
                events(.shardWaitExpired(waiting, waited: request.shardWait))
                return
            }
            if !announced {
                events(.waitingForShards(waiting))
                announced = true
            }
            try stop.check()
            try await Task.sleep(for: .seconds(1))
        }
    }

    /// Writes the metrics file, if asked for; a failure to write is told, never the run's fate.
    func writeMetrics(
        _ request: Request, outcome: RunOutcome, startedAt: Date, counts: RecoveryReport.Counts?, figures: LedgerFigures,
        redelivery: RedeliverySummary? = nil, answers: RefundAnswersResult? = nil
    ) {
        guard let path = request.metricsFile else { return }
        let ledger = figures.value
        let metrics = RunMetrics(
            kind: request.kind, pair: verifier.configuration.pair, outcome: outcome, dryRun: request.dryRun, shard: request.shard.isWhole ? nil : request.shard.description,
            startedAt: startedAt, finishedAt: now(), counts: counts, api: client.counts, runsByOutcome: ledger.runs, lastSuccess: ledger.lastSuccess,
            redelivery: redelivery, answers: answers?.byOutcome ?? (request.answering == nil ? nil : [:])
        )
        do {
            try writeMetricsFile(metrics, path)
        } catch {
            events(.metricsNotWritten(path: path, error: "\(error)"))
        }
    }

    // MARK: Accounts

    /// Which accounts a `repair` run repairs.
    package enum AccountChoice: Sendable {
        /// The accounts of these transaction IDs (any of each account's): support cases.
        case named(transactionIds: [String])
        /// Every account of this environment whose stored state contradicts itself.
        case ledgerScan
    }

    /// Repairs accounts from Apple's present state, without recovering a window first: under the
    /// run lock and a row of `app_store.runs` (kind `repair`) unless dry. Its result has no pass 1.
    package func repairAccounts(_ choice: AccountChoice, mode: RunMode, concurrency: Int) async throws -> RunResult {
        try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
        let dryRun = mode == .dryRun
        var configured = CustomerRepair(client: client, verifier: verifier, store: store, logger: logger, progress: progress, concurrency: concurrency, stop: stop)
        configured.overdueAfter = overdueAfter
        let repair = configured
        var targets: [CustomerRepair.Target] = []
        switch choice {
        case .ledgerScan:
            try await repair.scanLedger(now: now()) { targets.append($0) }
        case .named(let transactionIds):
            for id in transactionIds {
                guard CustomerRepair.isWellFormedTransactionId(id) else { throw NotATransactionId(text: id) }
                let customer = try await store.customer(ofTransaction: id, pair: verifier.configuration.pair) ?? id
                targets.append(CustomerRepair.Target(customer: customer, transactionId: id, reasons: [.named]))
            }
        }
        let chosen = targets
        let repairAll = { @Sendable () async throws -> RunResult in
            try await recorded(.repair, mode: mode, window: nil, shard: .whole) { result in
                defer { progress.finish() }
                do {
                    let startedAt = now()
                    let repairs = try await repair.repair(chosen, dryRun: dryRun)
                    result.passTwo = PassTwoResult(repairs: repairs, startedAt: startedAt, finishedAt: now())
                } catch is RunStopped {
                    result.ending = .stopped
                }
            }
        }
        if dryRun { return try await repairAll() }
        return try await RunLock.withLock(databaseURL, store: store, logger: logger, pair: verifier.configuration.pair, kind: .repair) {
            let abandoned = try await store.abandonDeadRuns(pair: verifier.configuration.pair, kinds: RunLock.kinds(sharing: .repair), shard: nil)
            if abandoned > 0 { events(.abandonedDeadRuns(abandoned)) }
            return try await repairAll()
        }
    }
}

/// A transaction ID that is not one: Apple's are digits only.
package struct NotATransactionId: Error, CustomStringConvertible, Sendable {
    package var text: String
    package init(text: String) { self.text = text }
    package var description: String { "'\(text.prefix(40))' is not a transaction ID: Apple's are digits only" }
}

extension RunOutcome {
    /// How a run that threw `error` ended: stopped on request or cancelled is `interrupted`.
    package init(endingWith error: any Error) {
        self = error is RunStopped || error is CancellationError ? .interrupted : .failed
    }
}

/// The ledger's side of the metrics, read once as a run ends.
final class LedgerFigures: Sendable {
    private let state = Mutex<(runs: [String: Int]?, lastSuccess: Date?)>((nil, nil))

    var value: (runs: [String: Int]?, lastSuccess: Date?) { state.withLock { $0 } }

    /// Reads without throwing: the database may be why the run ended.
    func read(from store: LedgerStore, kind: RunKind, pair: AppStorePair) async {
        let runs = try? await store.runsByOutcome(kind: kind, pair: pair)
        let last = try? await store.lastSuccessfulRun(kind: kind, pair: pair)?.finishedAt
        state.withLock { $0 = (runs, last) }
    }
}
