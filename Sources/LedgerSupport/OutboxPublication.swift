package import Logging
package import PostgresNIO

/// The publication Debezium or Sequin reads the outbox through (issue 66, docs/streams.md):
/// `migrate` creates it when the server's `wal_level` is `logical`, and otherwise says how.
package enum OutboxPublication {
    package static let name = "appstore_reconcile_outbox"

    package enum State: Hashable, Sendable {
        /// Made by this `migrate`.
        case created
        /// There before.
        case existed
        /// The server's wal_level (`replica`, `minimal`) cannot feed logical replication.
        case walLevel(String)
        /// The role may not create it (PostgreSQL's message).
        case refused(String)
        /// The ledger has no outbox (a partial set of migrations).
        case noOutbox

        /// What `migrate` prints; nil when there is nothing to say.
        package var message: String? {
            switch self {
            case .created: "Created the publication \(OutboxPublication.name) for app_store.outbox: Debezium or Sequin can read the lifecycle events (docs/streams.md)."
            case .existed, .noOutbox: nil
            case .walLevel(let level):
                "The publication \(OutboxPublication.name) is not created: the server's wal_level is \(level). To stream the outbox's events, set wal_level = logical (and restart the server), then run migrate again (docs/streams.md). The events are recorded in app_store.outbox either way."
            case .refused(let reason):
                "The publication \(OutboxPublication.name) is not created: \(reason). A role with CREATE on the database (or its owner) can run: CREATE PUBLICATION \(OutboxPublication.name) FOR TABLE app_store.outbox WITH (publish = 'insert'); (docs/streams.md)."
            }
        }
    }

    /// Creates the publication where it can; never fails `migrate` for want of it. `migrate`
    /// runs it after the migrations, every time (a server given wal_level=logical later gets it then).
    package static func ensure(_ client: PostgresClient, logger: Logger) async throws -> State {
        let rows = try await client.query(
            """
            SELECT to_regclass('app_store.outbox') IS NOT NULL, current_setting('wal_level'),
                EXISTS (SELECT 1 FROM pg_publication WHERE pubname = \(name))
            """,
            logger: logger
        )
        var found: (Bool, String, Bool)?
        for try await row in rows.decode((Bool, String, Bool).self) { found = row }
        guard let (outbox, level, exists) = found, outbox else { return .noOutbox }
        if exists { return .existed }
        guard level == "logical" else { return .walLevel(level) }
        do {
            try await client.query(
                "CREATE PUBLICATION \(unescaped: name) FOR TABLE app_store.outbox WITH (publish = 'insert')", logger: logger)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42501" {
            return .refused(error.serverInfo?[.message] ?? "permission denied")
        }
        return .created
    }
}
