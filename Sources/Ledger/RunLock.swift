import Foundation
import Logging
import PostgresNIO

/// One reconciling run at a time per ledger: a session advisory lock held on a connection of its
/// own for the whole run. A second run finds it taken and stops at once; the lock dies with its
/// connection, so a run that crashed leaves nothing stale behind.
public enum RunLock {
    /// "appsrun" in ASCII: distinct from the migration lock.
    public static let key: Int64 = 0x6170_7073_7275_6e00

    /// Runs `body` holding the lock, or throws `RunInProgress` naming the holder.
    public static func withLock<Result: Sendable>(
        _ url: DatabaseURL, store: LedgerStore, logger: Logger, _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        let connection = try await PostgresConnection.connect(configuration: try url.connectionConfiguration(), id: 1, logger: logger)
        do {
            var acquired = false
            for try await value in try await connection.query("SELECT pg_try_advisory_lock(\(key))", logger: logger).decode(Bool.self) {
                acquired = value
            }
            guard acquired else { throw RunInProgress(holder: try await store.runningRun()) }
            let result = try await body()
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

/// Another run holds the lock.
public struct RunInProgress: Error, CustomStringConvertible, Sendable {
    public var holder: LedgerStore.RunningRun?

    public var description: String {
        guard let holder else { return "another appstore-reconcile run is in progress on this ledger" }
        return "another appstore-reconcile run is in progress on this ledger: \(holder.kind) run \(holder.id) on \(holder.host ?? "an unknown host")"
            + "\(holder.pid.map { " (pid \($0))" } ?? "") since \(holder.startedAt.formatted(.iso8601))"
    }
}

extension LedgerStore {
    public struct RunningRun: Sendable, Hashable {
        public var id: UUID
        public var kind: String
        public var host: String?
        public var pid: Int?
        public var startedAt: Date
    }

    /// The newest run recorded as still running.
    public func runningRun() async throws -> RunningRun? {
        let rows = try await client.query(
            """
            SELECT run_id, kind, host, pid, started_at FROM app_store.runs WHERE outcome = 'running'
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
