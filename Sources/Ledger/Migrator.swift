import Logging
package import PostgresNIO

/// Applies the pending migrations: each in its own transaction, recorded with its checksum in
/// `app_store.schema_migrations`, under a session advisory lock so that concurrent runs (two
/// deploys, two pods) take turns instead of colliding. Running it again changes nothing.
package struct Migrator: Sendable {
    package var migrations: [Migration]
    /// How long a migration's statement may wait for a table lock (`lock_timeout`). A migration
    /// that alters a table waits for every transaction using it, and every writer that comes
    /// after waits behind the migration: `serve` included. Past this, the migration fails,
    /// changes nothing (its transaction rolls back), and `migrate` exits 75, to be run again.
    package var lockTimeout: Duration

    /// The advisory lock key all `migrate` runs share ("appstore" in ASCII).
    package static let lockKey: Int64 = 0x6170_7073_746f_7265

    package init(migrations: [Migration] = Migration.bundled, lockTimeout: Duration = .seconds(10)) {
        self.migrations = migrations
        self.lockTimeout = lockTimeout
    }

    package struct Outcome: Hashable, Sendable {
        /// File names applied by this call, in order.
        package var applied: [String]
        /// How many were already applied before.
        package var alreadyApplied: Int
        /// The conversion of signed payloads stored before migration 0021 (`StoredJWSConversion`).
        package var conversion = StoredJWSConversion.Outcome()
        /// Subscriptions written before migration 0029 given what they owe (`DueBackfill`).
        package var dueFilled = 0
    }

    package func migrate(_ client: PostgresClient, logger: Logger) async throws -> Outcome {
        try await client.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            do {
                // For this session (a pooled connection: reset below).
                try await connection.query("SELECT set_config('lock_timeout', \(lockTimeout.postgresSetting), false)", logger: logger)
                var outcome = try await migrateHoldingLock(connection, logger: logger)
                outcome.conversion = try await StoredJWSConversion().run(on: connection, logger: logger)
                outcome.dueFilled = try await DueBackfill().run(on: connection, logger: logger)
                try await connection.query("SELECT set_config('lock_timeout', '0', false)", logger: logger)
                try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                return outcome
            } catch {
                // The lock is released with the session if this fails too.
                _ = try? await connection.query("SELECT set_config('lock_timeout', '0', false)", logger: logger)
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                throw error
            }
        }
    }

    /// The migrations already recorded in the database, through a client.
    package func applied(_ client: PostgresClient, logger: Logger) async throws -> [AppliedMigration] {
        try await client.withConnection { try await applied($0, logger: logger) }
    }

    /// The migrations already recorded in the database (none for a fresh database).
    package func applied(_ connection: PostgresConnection, logger: Logger) async throws -> [AppliedMigration] {
        let exists = try await connection.query(
            "SELECT to_regclass('app_store.schema_migrations') IS NOT NULL", logger: logger
        ).collect().first?.decode(Bool.self) ?? false
        guard exists else { return [] }
        var applied: [AppliedMigration] = []
        let rows = try await connection.query(
            "SELECT version, name, checksum FROM app_store.schema_migrations ORDER BY version", logger: logger
        )
        for try await (version, name, checksum) in rows.decode((Int, String, String).self) {
            applied.append(AppliedMigration(version: version, name: name, checksum: checksum))
        }
        return applied
    }

    private func migrateHoldingLock(_ connection: PostgresConnection, logger: Logger) async throws -> Outcome {
        try await connection.query("CREATE SCHEMA IF NOT EXISTS app_store", logger: logger)
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS app_store.schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            logger: logger
        )
        let applied = try await applied(connection, logger: logger)
        switch MigrationPlan(available: migrations, applied: applied) {
        case .refuse(let reason):
            throw MigrationRefused(reason: reason)
        case .apply(let pending):
            for migration in pending {
                logger.info("applying migration", metadata: ["migration": "\(migration.name)"])
                try await connection.withTransaction(logger: logger) { transaction in
                    // Recorded first: a file's last statement, which may take a table's lock
                    // (0021's change of shape), is then followed by the commit alone.
                    try await transaction.query(
                        """
                        INSERT INTO app_store.schema_migrations (version, name, checksum)
                        VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                        """,
                        logger: logger
                    )
                    for statement in migration.statements {
                        // Migration files are the one place SQL text is not built with bound
                        // values: they are fixed files of this project, embedded at build time.
                        try await transaction.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                }
            }
            return Outcome(applied: pending.map(\.name), alreadyApplied: applied.count)
        }
    }
}

/// `migrate` would not run, with the reason (an edited or unknown applied migration).
package struct MigrationRefused: Error, Hashable, Sendable, CustomStringConvertible {
    package var reason: String
    package var description: String { "migration refused: \(reason)" }
}
