package import AppStoreServerAPI
import Crypto
package import Decisions
package import Foundation
package import Ledger
package import Logging
package import SignedData

/// Pass 1: recovers the notifications of an outage window. Pages Get Notification History by
/// the query plan, verifies every payload, compares with the ledger a page at a time, and
/// applies only what was missed, one database transaction per page. A dry run computes the same
/// plan and writes nothing. Later pages are fetched and verified while one is applied
/// (`PagePipeline`).
package struct NotificationRecovery: Sendable {
    package struct Options: Sendable {
        package var window: OutageWindow
        package var dryRun: Bool
        package var onlyFailures: Bool
        /// The `app_store.runs` row this pass belongs to (`ReconciliationRun` records it, both
        /// passes under one row). Required unless `dryRun`: a pass that writes belongs to a run.
        package var runId: UUID?
        /// This worker's part of a sharded run: pass 1 pages only its sub-window.
        package var shard: Shard
        /// Resume from the checkpoints an unfinished run of the same window left, and record this
        /// run's (never in a dry run).
        package var checkpoints: Bool
        /// The team's webhook handler (`DeliveryTarget.url`): every notification this pass records
        /// is queued for re-delivery there, in the transaction that records it.
        package var deliverTo: String?
        /// Recover only these types (`QueryPlan.onlyTypes`); nil: everything.
        package var onlyTypes: [NotificationType]?

        package init(
            window: OutageWindow, dryRun: Bool = false, onlyFailures: Bool = false, runId: UUID? = nil, shard: Shard = .whole,
            checkpoints: Bool = true, deliverTo: String? = nil, onlyTypes: [NotificationType]? = nil
        ) {
            self.onlyTypes = onlyTypes
            self.deliverTo = deliverTo
            self.window = window
            self.dryRun = dryRun
            self.onlyFailures = onlyFailures
            self.runId = runId
            self.shard = shard
            self.checkpoints = checkpoints
        }

        /// Where this run's checkpoints live.
        package func checkpointScope(_ pair: AppStorePair) -> CheckpointScope {
            CheckpointScope(
                pair: pair, windowStart: window.requestedStart, windowEnd: window.end, onlyFailures: onlyFailures,
                shard: shard.description
            )
        }
    }

    package let client: AppStoreServerAPIClient
    package let verifier: SignedDataVerifier
    package let store: LedgerStore
    package let logger: Logger
    package let progress: any RunProgress
    package let stop: StopRequest
    /// The clock Apple's retention limit is read against.
    package let now: @Sendable () -> Date

    package init(
        client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, logger: Logger,
        progress: any RunProgress = NoProgress(), stop: StopRequest = StopRequest(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.now = now
        self.client = client
        self.verifier = verifier
        self.store = store
        self.logger = logger
        self.progress = progress
        self.stop = stop
    }

    /// The next page, as the write of the current one left it.
    enum Upcoming {
        case notTaken
        case taken(PagePipeline.Ready, Task<RecoveryPlanner.LedgerSnapshot, any Error>?)
        case ended
        case failed(any Error)
    }

    /// Pass 1 over `options.window`. The caller owns the run: its row, its lock, its outcome
    /// (`ReconciliationRun`). Stopped on request, it returns what it did until then
    /// (`PassOneResult.stopped`); it throws only what made it fail.
    package func run(_ options: Options) async throws -> PassOneResult {
        precondition(options.dryRun || options.runId != nil, "a pass 1 that writes belongs to a recorded run")
        let startedAt = now()
        let pair = verifier.configuration.pair
        let runId = options.runId ?? UUID()
        let plan = QueryPlan(window: options.shard.subWindow(of: options.window), onlyFailures: options.onlyFailures, onlyTypes: options.onlyTypes)
        let scope = options.checkpointScope(pair)
        let checkpointing = !options.dryRun && options.checkpoints
        var tally = Tally(missed: try ReportList(), rejected: try ReportList(), timeline: ReportTimeline(start: plan.window.start, end: plan.window.end))
        let requestsBefore = client.counts.requests[.notificationHistory] ?? 0
        var resumed: [UUID]?
        var passOneDone = false
        do {
            let saved = checkpointing ? try await store.resumableCheckpoints(in: scope) : [:]
            resumed = try await takeOver(saved, tally: &tally)
            passOneDone = saved[QueryCheckpoint.passOneKey]?.completed == true
            if !passOneDone {
                let place = checkpointing ? scope : nil
                // Checkpoints of per-type remainder queries (an earlier release's) are not
                // resumed: the unfiltered pass reads those notifications again, as recorded.
                for query in plan.queries {
                    try await process(query, saved: saved[query.key], scope: place, plan: plan, options: options, runId: runId, tally: &tally)
                }
                try await retryDeferred(options: options, runId: runId, tally: &tally)
                if checkpointing {
                    try await store.saveCheckpoint(
                        QueryCheckpoint(query: QueryCheckpoint.passOneKey, position: tally.counts.fetched + tally.handledBefore, paginationToken: nil, completed: true),
                        in: scope, runId: runId
                    )
                }
            }
            return try await result(
                runId: runId, options: options, plan: plan, startedAt: startedAt, tally: tally, requestsBefore: requestsBefore, resumed: resumed,
                passOneDone: passOneDone
            )
        } catch is RunStopped {
            // No read of the ledger on the way out: the database going away is often why a run
            // is stopped, and a stopped run's report (its customers list) is not written.
            return try await result(
                runId: runId, options: options, plan: plan, startedAt: startedAt, tally: tally, requestsBefore: requestsBefore, resumed: resumed,
                passOneDone: passOneDone, stopped: true
            )
        } catch {
            progress.finish()
            throw error
        }
    }

    /// Takes over what earlier, unfinished runs of the same scope did: counts what their
    /// checkpoints cover, and reports again the payloads they rejected (pass 2 looks at those
    /// customers too). Returns the earlier runs, or nil when there is nothing to resume.
    private func takeOver(_ saved: [String: QueryCheckpoint], tally: inout Tally) async throws -> [UUID]? {
        guard !saved.isEmpty else { return nil }
        let queries = saved.values.filter { $0.query != QueryCheckpoint.passOneKey }
        tally.handledBefore = saved[QueryCheckpoint.passOneKey]?.position ?? queries.map(\.position).reduce(0, +)
        tally.queriesFinishedBefore = queries.filter(\.completed).count
        let runs = Array(Set(saved.values.compactMap(\.runId))).sorted { $0.uuidString < $1.uuidString }
        for earlier in try await store.rejections(ofRuns: runs) {
            tally.counts.rejected += 1
            // A row from before migration 0016 names its customer only in its payload.
            let customer = earlier.unverifiedOriginalTransactionId ?? earlier.payloadToRead.flatMap { UnverifiedPayload.names(ofNotification: $0).originalTransactionId }
            tally.reject(.init(notificationUUID: earlier.notificationUUID, originalTransactionId: customer, reason: earlier.reason, detail: earlier.detail))
        }
        logger.notice(
            "resuming an unfinished run of this window",
            metadata: ["handledBefore": "\(tally.handledBefore)", "queriesFinishedBefore": "\(tally.queriesFinishedBefore)", "runs": "\(runs)"]
        )
        return runs
    }

    /// Pages one query, with the next page fetched while this one is verified and applied, from
    /// where a checkpoint says an earlier run stopped; its paging decisions are `QueryPaging`'s.
    /// When Apple refuses a pagination token (expired, 4000017, or invalid, 4000014), the query
    /// starts over from its first page and skips the notifications this process already handled
    /// in it, by `notificationUUID` (`HandledNotifications`), never by position: Apple's order is
    /// not documented as stable, and with `--only-failures` the list shrinks as retries succeed.
    /// (A run resumed from a checkpoint whose token is refused knows none: it reads the query
    /// again, and what the ledger already holds is skipped as already recorded.)
    private func process(
        _ query: QueryPlan.Query, saved: QueryCheckpoint?, scope: CheckpointScope?, plan: QueryPlan, options: Options, runId: UUID,
        tally: inout Tally
    ) async throws {
        var paging = QueryPaging(query: query.key, saved: saved)
        var handled = HandledNotifications()
        var action = paging.start()
        while case .fetch(let token, let position, let skipHandled) = action {
            do {
                try await processOnce(
                    query, from: token.map { ($0, position) }, scope: scope, plan: plan, options: options, runId: runId,
                    skipping: skipHandled && handled.count > 0 ? handled : nil, handled: &handled, paging: &paging, tally: &tally
                )
                action = .done
            } catch let error as AppStoreAPIError where error.code == .startDateTooFarInPast {
                // Apple's limit overtook the window's start while the run paged (the window was
                // checked with a margin when the run began): the query starts over from the
                // limit as it is now, plus the margin, and skips what it handled. What was signed
                // before that has left Apple's history: no query can fetch it any more.
                guard tally.retention.move(to: plan.window.movedPastRetention(verifier.configuration.pair.environment, now: now())?.start) else {
                    throw error
                }
                logger.warning(
                    "Apple's history no longer holds the window's start; the query starts over from \(tally.retention.startMovedTo!.formatted(.iso8601))",
                    metadata: ["query": "\(query)", "requestedStart": "\(plan.window.requestedStart.formatted(.iso8601))"]
                )
                action = paging.windowStartMoved()
            } catch let error as AppStoreAPIError where error.isPaginationTokenProblem {
                action = paging.tokenRefused()
                guard action != .fail else { throw error }
                logger.notice(
                    "pagination token refused; starting the query over",
                    metadata: ["query": "\(query)", "error": "\(error)", "handled": "\(paging.handled)"]
                )
            }
        }
    }

    /// - Parameters:
    ///   - from: a token and the position of the page it fetches; nil: the query's first page.
    ///   - scope: where to record checkpoints; nil: none.
    private func processOnce(
        _ query: QueryPlan.Query, from: (token: String, position: Int)?, scope: CheckpointScope?, plan: QueryPlan, options: Options,
        runId: UUID, skipping alreadyHandled: HandledNotifications?, handled: inout HandledNotifications, paging: inout QueryPaging,
        tally: inout Tally
    ) async throws {
        let pages = client.notificationHistory(plan.request(for: query, start: tally.retention.startMovedTo), resumingAfter: from?.token)
        // Later pages are fetched and verified while this one is compared and written:
        // verification (CPU) and Apple's round trips overlap the database's.
        let verifier = self.verifier
        var pipeline = PagePipeline(first: pages.makeAsyncIterator(), at: from?.position ?? 0) { fetched in
            // After a restart, what an earlier attempt handled, by notificationUUID.
            let items = fetched.page.response.notificationHistory
                .filter { item in alreadyHandled.map { !$0.contains(item) } ?? true }
                .filter { item in query.skipping.isEmpty || !Self.isPriorityPair(item, query.skipping) }
            return PagePipeline.Ready(
                page: fetched.page, items: items, inputs: await PageInputs.verify(items, with: verifier)
            )
        }
        defer { pipeline.cancel() }
        // A page with payloads left for a later try (an OCSP responder out of reach) holds the
        // query's checkpoints back (`QueryPaging`), so that a run that dies before that try fetches them again.
        // The page after the one being written, taken from the pipeline while the write is in
        // flight, with its ledger read already started (see `handle`).
        var upcoming = Upcoming.notTaken
        defer { if case .taken(_, let snapshot) = upcoming { snapshot?.cancel() } }
        while true {
            try stop.check()
            let current: (step: PagePipeline.Ready, snapshot: Task<RecoveryPlanner.LedgerSnapshot, any Error>?)
            switch upcoming {
            case .taken(let step, let snapshot): current = (step, snapshot)
            case .ended: return
            case .failed(let error): throw error
            case .notTaken:
                guard let step = try await pipeline.next() else { return }
                current = (step, nil)
            }
            upcoming = .notTaken
            let step = current.step
            let page = step.page
            let items = step.items
            // The checkpoint after this page, written with it (none while a page's payloads wait for a later try).
            let checkpoint = scope.flatMap { scope in
                paging.checkpoint(afterPageOf: items.count, resumeToken: page.resumeToken).map { ($0, scope) }
            }
            let store = self.store
            let deferred = try await handle(
                items, verified: step.inputs, snapshot: current.snapshot, options: options, runId: runId, checkpoint: checkpoint,
                tally: &tally
            ) {
                // While this page is written: the next page, and its ledger read.
                do {
                    if let next = try await pipeline.next() {
                        let inputs = next.inputs
                        // A dry run reads the next page's ledger state now; a real run reads it under its customers' locks.
                        upcoming = .taken(
                            next, inputs.isEmpty || !options.dryRun ? nil : Task { try await PageInputs.snapshot(for: inputs, pair: verifier.configuration.pair, store: store) })
                    } else {
                        upcoming = .ended
                    }
                } catch {
                    // Thrown after this page is recorded, as when met at the top of the loop.
                    upcoming = .failed(error)
                }
            }
            paging.pageWritten(items: items.count, leftForLater: deferred)
            handled.insert(step.inputs)
            tally.pages += 1
            progress.update(
                "pages \(tally.pages) · fetched \(tally.counts.fetched) · missed \(tally.counts.missed) · rejected \(tally.counts.rejected)",
                requests: client.counts.requests[.notificationHistory] ?? 0
            )
        }
    }

    /// A notification that a priority query already fetched (read without verifying: only for
    /// skipping, never for applying).
    static func isPriorityPair(_ item: NotificationHistoryItem, _ pairs: Set<QueryPlan.TypeAndSubtype>) -> Bool {
        guard let fields = UnverifiedPayload.fields(of: item.signedPayload), case .string(let type)? = fields["notificationType"] else {
            return false
        }
        var subtype: NotificationSubtype?
        if case .string(let raw)? = fields["subtype"] { subtype = NotificationSubtype(rawValue: raw) }
        return pairs.contains(QueryPlan.TypeAndSubtype(NotificationType(rawValue: type), subtype))
    }

    /// Verifies a page's items in parallel (unless given verified), reads the ledger once (or
    /// takes a read already started), plans, and applies, with the checkpoint in the same
    /// database transaction; `whileWriting` runs while the write is in flight. Returns whether
    /// payloads were left for a later try (the checkpoint is then not written).
    ///
    /// A real run's memory holds the effects of its previous page only, not the whole run's:
    /// this page's ledger read may have started while that page was being written, so it sees
    /// everything before that page, and the memory adds that page. The planner takes the newer
    /// of the ledger and the memory, so a read that did see that page changes nothing.
    @discardableResult
    private func handle(
        _ items: [NotificationHistoryItem], verified: [RecoveryPlanner.Input]? = nil,
        snapshot started: Task<RecoveryPlanner.LedgerSnapshot, any Error>? = nil, options: Options, runId: UUID,
        checkpoint: (QueryCheckpoint, CheckpointScope)? = nil, tally: inout Tally, whileWriting: () async -> Void = {}
    ) async throws -> Bool {
        guard !items.isEmpty else {
            started?.cancel()
            if let (checkpoint, scope) = checkpoint { try await store.saveCheckpoint(checkpoint, in: scope, runId: runId) }
            return false
        }
        var inputs: [RecoveryPlanner.Input]
        if let verified { inputs = verified } else { inputs = await PageInputs.verify(items, with: verifier) }
        inputs.removeAll { input in
            guard case .rejected = input.outcome else { return false }
            // The signing input (header and payload), not the whole JWS: the same content signed
            // again is the same payload.
            let signed = input.item.signedPayload.utf8
            let content = signed.lastIndex(of: UInt8(ascii: ".")).map { signed[..<$0] } ?? signed[...]
            return !tally.rejectedPayloads.insert(SHA256.hash(data: Array(content))).inserted
        }
        // Left for a later try: what could not be verified now (the plan's retry-later decisions).
        let deferred = inputs.compactMap { input in if case .retryLater = input.outcome { input.item } else { nil } }
        let plan: RecoveryPlanner.PagePlan
        var outcome: LedgerBatchOutcome?
        if options.dryRun {
            let snapshot: RecoveryPlanner.LedgerSnapshot
            if let started { snapshot = try await started.value } else { snapshot = try await PageInputs.snapshot(for: inputs, pair: verifier.configuration.pair, store: store) }
            plan = RecoveryPlanner.plan(inputs, ledger: snapshot, memory: &tally.memory)
        } else {
            // Read, planned and written with the page's customers locked (issue 31: a live
            // notification written meanwhile by serve is never undone by this page's plan).
            started?.cancel()
            let memory = tally.memory
            let deliverTo = options.deliverTo
            async let written = PageInputs.applyLocked(
                inputs, pair: verifier.configuration.pair, store: store, runId: runId, checkpoint: deferred.isEmpty ? checkpoint : nil
            ) { snapshot in
                var memory = memory
                var plan = RecoveryPlanner.plan(inputs, ledger: snapshot, memory: &memory)
                // The rows before the run changed them, for the report (app_store.run_subscription_changes).
                plan.batch.subscriptionsBefore = memory.subscriptionsBefore
                plan.batch.deliverTo = deliverTo
                return (plan.batch, (plan, memory))
            }
            await whileWriting()
            let (result, (planned, memoryAfter)) = try await written
            plan = planned
            outcome = result
            tally.memory = memoryAfter.keeping(only: planned.batch)
        }
        tally.record(plan, outcome: outcome, dryRun: options.dryRun, delivering: options.deliverTo != nil)
        tally.retryLater += deferred
        return !deferred.isEmpty
    }

    /// Payloads that could not be verified (an OCSP responder out of reach) get one more try.
    private func retryDeferred(options: Options, runId: UUID, tally: inout Tally) async throws {
        guard !tally.retryLater.isEmpty else { return }
        let items = tally.retryLater
        tally.retryLater = []
        tally.counts.fetched -= items.count
        try await handle(items, options: options, runId: runId, tally: &tally)
        tally.counts.retryLater = tally.retryLater.count
    }

    /// What the pass did, as a value: its counts and lists, and what pass 2 needs from it.
    private func result(
        runId: UUID, options: Options, plan: QueryPlan, startedAt: Date, tally: Tally, requestsBefore: Int, resumed: [UUID]? = nil,
        passOneDone: Bool = false, stopped: Bool = false
    ) async throws -> PassOneResult {
        progress.finish()
        // A stopped pass reads nothing more (see the caller): its report is not written.
        let changes = stopped ? ReportList([]) : try await changedSubscriptions(runId: runId, options: options, tally: tally)
        var result = PassOneResult(
            runId: options.dryRun ? nil : runId, dryRun: options.dryRun, window: options.window, plan: plan, shard: options.shard,
            startedAt: startedAt, finishedAt: now(), missed: tally.missed, rejected: tally.rejected, customers: changes, timeline: tally.timeline
        )
        result.stopped = stopped
        result.counts = tally.counts
        result.counts.apiRequests = (client.counts.requests[.notificationHistory] ?? 0) - requestsBefore
        result.deliveryFailures = .init(byFirstAttemptResult: tally.byResult, byHourOfFirstAttempt: tally.byHour)
        result.rejectedCustomers = tally.rejectedCustomers
        if options.dryRun {
            result.recoveredInDryRun = tally.recoveredInDryRun
            result.overlay.subscriptions = tally.memory.subscriptions
            result.overlay.transactions = tally.memory.transactions
            result.overlay.wouldRecord = tally.wouldRecord
            result.overlay.refundRequests = tally.refundEpisodes.refundRequests
            result.overlay.refundDecisions = tally.refundEpisodes.refundDecisions
        }
        result.startMovedTo = tally.retention.startMovedTo
        if let resumed {
            result.resumed = .init(
                fromRuns: resumed.map { $0.uuidString.lowercased() }, notificationsHandledBefore: tally.handledBefore,
                queriesFinishedBefore: tally.queriesFinishedBefore, passOneDoneBefore: passOneDone
            )
        }
        return result
    }

    /// The subscription rows the pass changed (a dry run: would have), before and after.
    private func changedSubscriptions(runId: UUID, options: Options, tally: Tally) async throws -> ReportList<RecoveryReport.CustomerChange> {
        let changes = try ReportList<RecoveryReport.CustomerChange>()
        if options.dryRun {
            for (customer, before) in tally.memory.subscriptionsBefore.sorted(by: { $0.key < $1.key }) {
                guard let after = tally.memory.subscriptions[customer] else { continue }
                changes.append(.init(originalTransactionId: customer, before: before, after: after))
            }
            return changes
        }
        // What this run changed, recorded with each page, read back a chunk at a time.
        var cursor: String?
        while true {
            let chunk = try await store.subscriptionChanges(ofRun: runId, after: cursor, limit: 1000)
            guard let last = chunk.last else { break }
            cursor = last.customer
            for change in chunk { changes.append(.init(originalTransactionId: change.customer, before: change.before, after: change.after)) }
        }
        return changes
    }
}
