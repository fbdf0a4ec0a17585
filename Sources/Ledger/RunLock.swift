package import Foundation
import Synchronization
package import Logging
import PostgresNIO
package import SignedData

/// One reconciling run at a time per App Store (app and environment) of a ledger: a session
/// advisory lock held on a connection of its own for the whole run, keyed by the pair (its first
/// key, a hash of the pair) and the kind and shard (its second). A second run finds it taken and stops at once; the lock dies with its
/// connection, so a run that crashed leaves nothing stale behind.
package enum RunLock {
    /// "appsrun" in ASCII: distinct from the migration lock.
    package static let key: Int64 = 0x6170_7073_7275_6e00

    /// The lock of one shard: shard INDEX of a sharded run takes `key + 1 + INDEX`, an unsharded
    /// run `key` itself. Shards of a window run side by side; Postgres's unique keys arbitrate
    /// their writes, as they do a live webhook's.
    package static func key(shardIndex: Int?) -> Int64 {
        shardIndex.map { key + 1 + Int64($0) } ?? key
    }

    /// The lock of a run of `kind`: `run` and `nightly` share one (per shard); the hourly
    /// refund-request check has its own, so that it never waits for a long nightly run.
    package static func key(kind: RunKind, shardIndex: Int?) -> Int64 {
        kind == .consumptionRequests ? key - 1 : key(shardIndex: shardIndex)
    }

    /// The kinds of run that take the same lock as `kind`.
    package static func kinds(sharing kind: RunKind) -> [RunKind] {
        kind == .consumptionRequests ? [.consumptionRequests] : [.run, .nightly, .repair, .compensate, .audit]
    }

    /// Shards up to this many have locks of their own.
    package static let maximumShards = 255

    /// Runs `body` holding the lock, or throws `RunInProgress` naming the holder.
    package static func withLock<Result: Sendable>(
        _ url: DatabaseURL, store: LedgerStore, logger: Logger, pair: AppStorePair, kind: RunKind = .run, shardIndex: Int? = nil,
        _ body: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        let key = Self.key(kind: kind, shardIndex: shardIndex)
        let pairKey = pair.description
        let second = Self.secondKey(key)
        let connection = try await PostgresConnection.connect(configuration: try url.connectionConfiguration(), id: 1, logger: logger)
        do {
            var acquired = false
            for try await value in try await connection.query("SELECT pg_try_advisory_lock(hashtext(\(pairKey)), \(second))", logger: logger).decode(Bool.self) {
                acquired = value
            }
            guard acquired else { throw RunInProgress(holder: try await store.runningRun(pair: pair, shard: shardIndex.map { "\($0)/" })) }
            // The lock lives as long as its connection. Should the connection drop (the server
            // restarted, the session was terminated), the run no longer holds the lock and
            // another may start: the run is cancelled at once and ends with RunLockLost.
            let state = LockWatch()
            let work = Task { try await body() }
            let outcome = Once<Result>()
            // The run's end, or, once the lock is lost, a deadline: work that does not answer its
            // cancellation (a lease the pool never grants after its sessions were terminated)
            // must not keep the process from exiting 75.
            Task {
                do { outcome.resume(returning: try await work.value) } catch { outcome.resume(throwing: error) }
            }
            connection.closeFuture.whenComplete { _ in
                guard !state.finished.load(ordering: .acquiring) else { return }
                state.lost.store(true, ordering: .releasing)
                work.cancel()
                Task {
                    try? await Task.sleep(for: Self.stopGrace)
                    outcome.resume(throwing: CancellationError())
                }
            }
            let result: Result
            do {
                result = try await withTaskCancellationHandler { try await outcome.value() } onCancel: { work.cancel() }
            } catch {
                state.finished.store(true, ordering: .releasing)
                if state.lost.load(ordering: .acquiring) { throw RunLockLost(underlying: "\(error)") }
                throw error
            }
            state.finished.store(true, ordering: .releasing)
            if state.lost.load(ordering: .acquiring) { throw RunLockLost(underlying: "the connection closed as the run ended") }
            _ = try? await connection.query("SELECT pg_advisory_unlock(hashtext(\(pairKey)), \(second))", logger: logger)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

extension RunLock {
    /// The lock's second key: the low 32 bits of `key(kind:shardIndex:)` (its high bits are the
    /// same for every kind and shard).
    static func secondKey(_ key: Int64) -> Int32 { Int32(truncatingIfNeeded: key & 0xFFFF_FFFF) }

    /// How long a run that lost its lock may take to stop before it is given up on.
    static let stopGrace: Duration = .seconds(10)
}

/// A result delivered once, by whichever of several tasks comes first.
final class Once<Value: Sendable>: Sendable {
    private let state = Mutex<(result: Swift.Result<Value, any Error>?, waiter: CheckedContinuation<Value, any Error>?)>((nil, nil))

    func resume(returning value: Value) { deliver(.success(value)) }
    func resume(throwing error: any Error) { deliver(.failure(error)) }

    private func deliver(_ result: Swift.Result<Value, any Error>) {
        let waiter: CheckedContinuation<Value, any Error>? = state.withLock { state in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }

    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Swift.Result<Value, any Error>? = state.withLock { state in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// Whether a run ended, and whether its lock's connection dropped before.
final class LockWatch: Sendable {
    let finished = Atomic<Bool>(false)
    let lost = Atomic<Bool>(false)
}

/// The connection that held the run lock dropped: the run stopped, since another could now start.
/// What it committed stays; running it again finishes the work.
package struct RunLockLost: Error, CustomStringConvertible, Sendable {
    package var underlying: String
    package var description: String {
        "the database connection holding the run lock dropped (the server restarted or the session was ended), so the run stopped (\(underlying.prefix(300)))"
    }
}

/// Another run holds the lock.
package struct RunInProgress: Error, CustomStringConvertible, Sendable {
    package var holder: LedgerStore.RunningRun?

    package var description: String {
        guard let holder else { return "another appstore-reconcile run is in progress on this ledger" }
        return "another appstore-reconcile run is in progress on this ledger: \(holder.kind) run \(holder.id) on \(holder.host ?? "an unknown host")"
            + "\(holder.pid.map { " (pid \($0))" } ?? "") since \(holder.startedAt.formatted(.iso8601))"
    }
}

extension LedgerStore {
    package struct RunningRun: Sendable, Hashable {
        package var id: UUID
        package var kind: String
        package var host: String?
        package var pid: Int?
        package var startedAt: Date
    }

    /// The newest run recorded as still running, of one App Store (nil: any); of one shard
    /// ("INDEX/", a prefix) or unsharded (nil).
    package func runningRun(pair: AppStorePair? = nil, shard: String? = nil, anyShard: Bool = false) async throws -> RunningRun? {
        let rows = try await client.query(
            """
            SELECT run_id, kind, host, pid, started_at FROM app_store.runs WHERE outcome = 'running'
              AND (\(pair == nil) OR (bundle_id = \(pair?.bundleId) AND environment = \(pair?.environment.rawValue)))
              AND (\(anyShard) OR CASE WHEN \(shard)::text IS NULL THEN shard IS NULL ELSE shard LIKE \(shard) || '%' END)
            ORDER BY started_at DESC LIMIT 1
            """,
            logger: logger
        )
        for try await (id, kind, host, pid, started) in rows.decode((UUID, String, String?, Int?, Date).self) {
            return RunningRun(id: id, kind: kind, host: host, pid: pid, startedAt: started)
        }
        return nil
    }
}

extension LedgerStore {
    /// A row of `app_store.runs`.
    package struct RunSummary: Sendable, Hashable, Codable {
        package var id: UUID
        package var kind: String
        package var environment: String
        /// Nil for a run recorded before migration 0020 in a ledger that held no app yet.
        package var bundleId: String?
        package var windowStart: Date?
        package var windowEnd: Date?
        package var startedAt: Date
        package var finishedAt: Date?
        package var outcome: String
        package var counts: [String: Int]
        package var host: String?
        package var pid: Int?
        /// "INDEX/COUNT" for a shard of a sharded run.
        package var shard: String?
    }

    /// The newest runs, newest first.
    package func recentRuns(limit: Int, pair: AppStorePair? = nil) async throws -> [RunSummary] {
        let rows = try await client.query(
            """
            SELECT run_id, kind, environment, window_start, window_end, started_at, finished_at, outcome, counts::text, host, pid, shard, bundle_id
            FROM app_store.runs WHERE \(pair == nil) OR (bundle_id = \(pair?.bundleId) AND environment = \(pair?.environment.rawValue))
            ORDER BY started_at DESC LIMIT \(limit)
            """,
            logger: logger
        )
        var runs: [RunSummary] = []
        for try await row in rows.decode((UUID, String, String, Date?, Date?, Date, Date?, String, String, String?, Int?, String?, String?).self) {
            // The numbers of the counts object; nested objects (per-endpoint figures) are left out.
            let object = (try? JSONSerialization.jsonObject(with: Data(row.8.utf8))) as? [String: Any] ?? [:]
            let counts = object.compactMapValues { ($0 as? NSNumber)?.intValue }
            runs.append(
                RunSummary(
                    id: row.0, kind: row.1, environment: row.2, bundleId: row.12, windowStart: row.3, windowEnd: row.4, startedAt: row.5,
                    finishedAt: row.6, outcome: row.7, counts: counts, host: row.9, pid: row.10, shard: row.11
                )
            )
        }
        return runs
    }

    /// The newest run that succeeded (with or without rejections), of one kind, or of any kind
    /// that recovers a window but the hourly refund-request check (which says nothing of the
    /// ledger's other notifications): a `repair` run recovers no window.
    /// Of one App Store, or of any (nil).
    package func lastSuccessfulRun(kind: RunKind? = nil, pair: AppStorePair? = nil) async throws -> RunSummary? {
        let rows = try await client.query(
            """
            SELECT run_id FROM app_store.runs WHERE outcome IN ('succeeded', 'succeeded_with_rejections')
              AND (\(pair == nil) OR (bundle_id = \(pair?.bundleId) AND environment = \(pair?.environment.rawValue)))
              AND (CASE WHEN \(kind?.rawValue)::text IS NULL THEN kind NOT IN (\(RunKind.consumptionRequests.rawValue), \(RunKind.repair.rawValue), \(RunKind.compensate.rawValue)) ELSE kind = \(kind?.rawValue) END)
            ORDER BY finished_at DESC LIMIT 1
            """,
            logger: logger
        )
        var id: UUID?
        for try await value in rows.decode(UUID.self) { id = value }
        guard let id else { return nil }
        return try await recentRuns(limit: 1000, pair: pair).first { $0.id == id }
    }

    /// How many runs of this kind and App Store the ledger records, by outcome.
    package func runsByOutcome(kind: RunKind, pair: AppStorePair) async throws -> [String: Int] {
        var found: [String: Int] = [:]
        let rows = try await client.query(
            """
            SELECT outcome, count(*) FROM app_store.runs
            WHERE kind = \(kind.rawValue) AND bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue)
            GROUP BY outcome
            """,
            logger: logger
        )
        for try await (outcome, count) in rows.decode((String, Int).self) {
            found[outcome] = count
        }
        return found
    }

    /// Whether some session holds a run lock now, of any App Store (a run is really in progress).
    package func runLockHeld() async throws -> Bool {
        let low = Int64(RunLock.secondKey(RunLock.key(shardIndex: nil)))
        let high = Int64(RunLock.secondKey(RunLock.key(shardIndex: RunLock.maximumShards)))
        let rows = try await client.query(
            """
            SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND objid::bigint BETWEEN \(low) AND \(high) AND objsubid = 2
            """,
            logger: logger
        )
        for try await count in rows.decode(Int.self) { return count > 0 }
        return false
    }
}
