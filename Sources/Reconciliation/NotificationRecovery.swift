import AppStoreServerAPI
import Foundation
import Ledger
import Logging
import SignedData

/// Pass 1: recovers the notifications of an outage window. Pages Get Notification History by
/// the query plan, verifies every payload, compares with the ledger a page at a time, and
/// applies only what was missed, one database transaction per page. A dry run computes the same
/// plan and writes nothing. Fetching the next page overlaps verifying and applying this one.
public struct NotificationRecovery: Sendable {
    public struct Options: Sendable {
        public var window: OutageWindow
        public var dryRun: Bool
        public var onlyFailures: Bool
        /// The `app_store.runs` row this pass belongs to, when the caller records the run itself
        /// (both passes under one row); nil: the pass records its own row.
        public var runId: UUID?

        public init(window: OutageWindow, dryRun: Bool = false, onlyFailures: Bool = false, runId: UUID? = nil) {
            self.window = window
            self.dryRun = dryRun
            self.onlyFailures = onlyFailures
            self.runId = runId
        }
    }

    public let client: AppStoreServerAPIClient
    public let verifier: SignedDataVerifier
    public let store: LedgerStore
    public let logger: Logger
    public let progress: ProgressLine
    public let stop: StopRequest

    public init(
        client: AppStoreServerAPIClient, verifier: SignedDataVerifier, store: LedgerStore, logger: Logger,
        progress: ProgressLine = ProgressLine(enabled: false), stop: StopRequest = StopRequest()
    ) {
        self.client = client
        self.verifier = verifier
        self.store = store
        self.logger = logger
        self.progress = progress
        self.stop = stop
    }

    /// Everything the run accumulates; grows with what was missed, not with the window.
    struct Tally {
        var counts = RecoveryReport.Counts()
        var memory = RecoveryPlanner.RunMemory()
        var missed: [RecoveryReport.Missed] = []
        var rejected: [RecoveryReport.Rejected] = []
        var byResult: [String: Int] = [:]
        var byHour: [String: Int] = [:]
        var retryLater: [NotificationHistoryItem] = []
        var pages = 0
    }

    public func run(_ options: Options) async throws -> RecoveryReport {
        let startedAt = Date()
        let environment = verifier.configuration.environment
        let ownsRunRow = !options.dryRun && options.runId == nil
        let runId: UUID
        if let given = options.runId {
            runId = given
        } else if ownsRunRow {
            runId = try await store.startRun(kind: "run", environment: environment.rawValue, windowStart: options.window.start, windowEnd: options.window.end)
        } else {
            runId = UUID()
        }
        let plan = QueryPlan(window: options.window, onlyFailures: options.onlyFailures)
        var tally = Tally()
        let requestsBefore = client.counts.requests[.notificationHistory] ?? 0
        do {
            for query in plan.priorityQueries {
                try await process(query, plan: plan, options: options, runId: runId, tally: &tally)
            }
            let strategy = plan.remainderStrategy(afterPriority: tally.counts.fetched)
            let remainder = plan.remainderQueries(strategy)
            for query in remainder {
                try await process(query, plan: plan, options: options, runId: runId, tally: &tally)
            }
            try await retryDeferred(options: options, runId: runId, tally: &tally)
            progress.finish()
            tally.counts.apiRequests = (client.counts.requests[.notificationHistory] ?? 0) - requestsBefore
            let report = makeReport(runId: runId, options: options, plan: plan, strategy: strategy, remainderCount: remainder.count, startedAt: startedAt, tally: tally)
            if ownsRunRow {
                try await store.finishRun(runId, outcome: report.outcome, countsJSON: report.countsJSON)
            }
            return report
        } catch {
            progress.finish()
            if ownsRunRow {
                try? await store.finishRun(
                    runId, outcome: error is CancellationError || error is RunStopped ? "interrupted" : "failed", countsJSON: Self.json(tally.counts)
                )
            }
            throw error
        }
    }

    /// Pages one query, with the next page fetched while this one is verified and applied.
    /// How often one query may start over after its pagination token expired or was refused.
    static let maximumRestarts = 3

    /// Pages one query, with the next page fetched while this one is verified and applied. When
    /// Apple refuses a pagination token (expired, 4000017, or invalid, 4000014), the query starts
    /// over from its first page and skips the items already handled: Apple's order within a query
    /// is stable, and anything recorded meanwhile is skipped as already recorded regardless.
    private func process(_ query: QueryPlan.Query, plan: QueryPlan, options: Options, runId: UUID, tally: inout Tally) async throws {
        var handledInQuery = 0
        var restarts = 0
        while true {
            do {
                try await processOnce(query, plan: plan, options: options, runId: runId, skipping: handledInQuery, handled: &handledInQuery, tally: &tally)
                return
            } catch let error as AppStoreAPIError where error.isPaginationTokenProblem && restarts < Self.maximumRestarts {
                restarts += 1
                logger.notice(
                    "pagination token refused; starting the query over",
                    metadata: ["query": "\(query)", "error": "\(error)", "handled": "\(handledInQuery)"]
                )
            }
        }
    }

    private func processOnce(
        _ query: QueryPlan.Query, plan: QueryPlan, options: Options, runId: UUID, skipping alreadyHandled: Int, handled: inout Int,
        tally: inout Tally
    ) async throws {
        let pages = client.notificationHistory(plan.request(for: query))
        typealias Step = (page: NotificationHistoryPage?, rest: NotificationHistoryPages.AsyncIterator)
        func fetch(_ iterator: NotificationHistoryPages.AsyncIterator) -> Task<Step, any Error> {
            Task {
                var iterator = iterator
                let page = try await iterator.next()
                return (page, iterator)
            }
        }
        var next = fetch(pages.makeAsyncIterator())
        defer { next.cancel() }
        var position = 0
        while true {
            try stop.check()
            let step = try await next.value
            guard let page = step.page else { return }
            next = fetch(step.rest)
            // After a restart, the items before `alreadyHandled` were handled by the first attempt.
            let fresh = page.response.notificationHistory.enumerated().filter { position + $0.offset >= alreadyHandled }.map(\.element)
            position += page.response.notificationHistory.count
            let items = fresh.filter { item in
                guard !query.skipping.isEmpty else { return true }
                return !Self.isPriorityPair(item, query.skipping)
            }
            try await handle(items, options: options, runId: runId, tally: &tally)
            handled = max(handled, position)
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

    /// Verifies a page's items in parallel, reads the ledger once, plans, and applies.
    private func handle(_ items: [NotificationHistoryItem], options: Options, runId: UUID, tally: inout Tally) async throws {
        guard !items.isEmpty else { return }
        let inputs = await PageInputs.verify(items, with: verifier)
        let snapshot = try await PageInputs.snapshot(for: inputs, store: store)

        let plan = RecoveryPlanner.plan(inputs, ledger: snapshot, memory: &tally.memory)
        var outcome: LedgerBatchOutcome?
        if !options.dryRun {
            outcome = try await store.apply(plan.batch, runId: runId)
        }
        record(plan, outcome: outcome, options: options, tally: &tally)
        tally.retryLater += zip(plan.decisions, inputs).compactMap { decision, input in decision.action == .retryLater ? input.item : nil }
    }

    /// Counts the page's decisions and lists the missed ones. A notification the plan meant to
    /// insert that the database already had (a live webhook recorded it meanwhile) counts as
    /// already recorded; a subscription change a newer live write overtook counts as stale.
    private func record(_ plan: RecoveryPlanner.PagePlan, outcome: LedgerBatchOutcome?, options: Options, tally: inout Tally) {
        for decision in plan.decisions {
            var action = decision.action
            if let outcome, action == .applied || action == .stale, let uuid = decision.notificationUUID.flatMap(UUID.init(uuidString:)),
                !outcome.insertedNotifications.contains(uuid)
            {
                action = .alreadyRecorded
            }
            if let outcome, action == .applied, let customer = decision.originalTransactionId,
                plan.batch.subscriptions.contains(where: { $0.originalTransactionId == customer }),
                !outcome.changedSubscriptions.contains(customer)
            {
                action = .stale
            }
            switch action {
            case .rejected:
                tally.counts.fetched += 1
                tally.counts.rejected += 1
                tally.rejected.append(
                    .init(
                        notificationUUID: decision.notificationUUID, originalTransactionId: decision.unverifiedCustomer,
                        reason: decision.rejection?.reason.rawValue ?? "", detail: decision.rejection?.detail ?? ""
                    )
                )
                continue
            case .retryLater:
                tally.counts.fetched += 1
                continue
            case .alreadyRecorded:
                tally.counts.fetched += 1
                tally.counts.alreadyRecorded += 1
                continue
            case .applied, .stale:
                tally.counts.fetched += 1
                tally.counts.missed += 1
                if action == .applied { tally.counts.applied += 1 } else { tally.counts.stale += 1 }
            }
            let label = options.dryRun ? (action == .applied ? "would-apply" : "would-apply-stale") : action.rawValue
            tally.missed.append(
                .init(
                    notificationUUID: decision.notificationUUID ?? "", notificationType: decision.notificationType ?? "",
                    subtype: decision.subtype, signedDate: decision.signedDate.map(Self.iso) ?? "",
                    originalTransactionId: decision.originalTransactionId, firstAttemptResult: decision.firstAttemptResult, action: label
                )
            )
            if let result = decision.firstAttemptResult, result != "SUCCESS" { tally.byResult[result, default: 0] += 1 }
            if let attempt = decision.firstAttemptDate { tally.byHour[Self.hour(attempt), default: 0] += 1 }
        }
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

    private func makeReport(
        runId: UUID, options: Options, plan: QueryPlan, strategy: QueryPlan.RemainderStrategy, remainderCount: Int, startedAt: Date, tally: Tally
    ) -> RecoveryReport {
        var changes: [RecoveryReport.CustomerChange] = []
        for (customer, before) in tally.memory.subscriptionsBefore.sorted(by: { $0.key < $1.key }) {
            guard let after = tally.memory.subscriptions[customer] else { continue }
            changes.append(.init(originalTransactionId: customer, before: before, after: after))
        }
        var report = RecoveryReport(
            run: .init(
                id: runId.uuidString.lowercased(), mode: options.dryRun ? "dry-run" : "apply",
                environment: verifier.configuration.environment.rawValue,
                window: .init(start: Self.iso(options.window.start), end: Self.iso(options.window.end)),
                startedAt: Self.iso(startedAt), finishedAt: Self.iso(Date()),
                plan: .init(
                    priorityQueries: plan.priorityQueries.map(\.description), remainder: strategy.rawValue,
                    remainderQueries: remainderCount, onlyFailures: options.onlyFailures
                )
            ),
            counts: tally.counts, missed: tally.missed, rejected: tally.rejected, customers: changes,
            deliveryFailures: .init(byFirstAttemptResult: tally.byResult, byHourOfFirstAttempt: tally.byHour)
        )
        report.pass1.subscriptions = tally.memory.subscriptions
        report.pass1.transactions = tally.memory.transactions
        return report
    }

    static func iso(_ date: Date) -> String { date.formatted(.iso8601) }

    static func hour(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let start = calendar.dateInterval(of: .hour, for: date)?.start ?? date
        return iso(start)
    }

    static func json(_ counts: RecoveryReport.Counts) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? String(decoding: encoder.encode(counts), as: UTF8.self)) ?? "{}"
    }
}
