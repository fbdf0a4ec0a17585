import Foundation
import Ledger
import Logging
import PostgresNIO

/// Where PostgreSQL's time goes during a measured run, from `pg_stat_statements`: only when the
/// throwaway cluster was started with it preloaded
/// (`THROWAWAY_POSTGRES_SETTINGS="shared_preload_libraries=pg_stat_statements"`), printed, never
/// part of the table of figures.
enum StatementProfile {
    /// Creates the extension and clears its counters; false when the server did not preload it.
    static func reset(_ url: String, logger: Logger) async throws -> Bool {
        try await LedgerDatabase.withClient(try DatabaseURL(url), logger: logger) { client in
            let loaded = try await client.query("SELECT current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'", logger: logger)
                .collect().first?.decode(Bool.self) ?? false
            guard loaded else { return false }
            try await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", logger: logger)
            try await client.query("SELECT pg_stat_statements_reset()", logger: logger)
            return true
        }
    }

    /// The statements that took the most time, per notification recorded: calls, execution
    /// ms, rows, blocks dirtied and WAL bytes, with the start of each statement's text.
    static func print(_ url: String, per notifications: Int, logger: Logger) async throws {
        try await LedgerDatabase.withClient(try DatabaseURL(url), logger: logger) { client in
            let rows = try await client.query(
                """
                SELECT calls, total_exec_time, rows, shared_blks_dirtied, wal_bytes::bigint,
                    regexp_replace(left(query, 160), '\\s+', ' ', 'g')
                FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 25
                """,
                logger: logger
            )
            let n = Double(notifications)
            say("   pg_stat_statements, per notification recorded (\(notifications)): calls, exec ms, rows, blocks dirtied, WAL bytes, statement")
            for try await (calls, milliseconds, count, dirtied, wal, text) in rows.decode((Int, Double, Int, Int, Int, String).self) {
                let figures = String(format: "   %7.3f %8.4f %7.2f %6.3f %8.0f", Double(calls) / n, milliseconds / n, Double(count) / n,
                                     Double(dirtied) / n, Double(wal) / n)
                say(figures + "  " + text)
            }
        }
    }
}
