import Foundation
import Ledger
import Logging
import PostgresNIO

/// What the ledger occupies and has written, read from PostgreSQL: the app_store tables' heap,
/// TOAST and index bytes, the WAL position, and how many notifications it holds. Two readings
/// give the bytes per notification of what happened between them (issue 34: the ledger's cost is
/// paid by everything else on the team's server).
struct LedgerFootprint {
    var heap = 0
    var toast = 0
    var indexes = 0
    var wal = 0
    var notifications = 0

    var tables: Int { heap + toast + indexes }

    static func read(_ url: String, logger: Logger) async throws -> LedgerFootprint {
        try await LedgerDatabase.withClient(try DatabaseURL(url), logger: logger) { client in
            let rows = try await client.query(
                """
                SELECT coalesce(sum(pg_relation_size(c.oid)), 0)::bigint,
                    coalesce(sum(pg_total_relation_size(c.oid) - pg_relation_size(c.oid) - pg_indexes_size(c.oid)), 0)::bigint,
                    coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint,
                    (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,
                    (SELECT count(*) FROM app_store.notifications)
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'app_store' AND c.relkind = 'r'
                """,
                logger: logger
            )
            for try await (heap, toast, indexes, wal, notifications) in rows.decode((Int, Int, Int, Int, Int).self) {
                return LedgerFootprint(heap: heap, toast: toast, indexes: indexes, wal: wal, notifications: notifications)
            }
            throw BenchmarkError("no footprint read")
        }
    }

    /// Bytes per notification added between two readings.
    struct PerNotification {
        var heap = Double.nan
        var toast = Double.nan
        var indexes = Double.nan
        var wal = Double.nan
        var tables: Double { heap + toast + indexes }

        var text: String {
            func kb(_ value: Double) -> String { number(value / 1000, 2) }
            return "\(kb(tables)) KB (heap \(kb(heap)), TOAST \(kb(toast)), indexes \(kb(indexes))); WAL \(kb(wal)) KB"
        }
    }

    static func perNotification(from start: LedgerFootprint, to end: LedgerFootprint) -> PerNotification {
        let added = Double(end.notifications - start.notifications)
        guard added > 0 else { return PerNotification() }
        return PerNotification(
            heap: Double(end.heap - start.heap) / added, toast: Double(end.toast - start.toast) / added,
            indexes: Double(end.indexes - start.indexes) / added, wal: Double(end.wal - start.wal) / added)
    }
}
