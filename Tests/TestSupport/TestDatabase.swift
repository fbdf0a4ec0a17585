import Foundation
import Ledger
import Logging
import PostgresNIO
import Synchronization
import ThrowawayPostgres

/// Databases for tests. With `DATABASE_URL` set, each test gets a fresh database on that
/// server; otherwise on one throwaway cluster per test process, started on first use and
/// stopped at exit (its watchdog removes it even if the process is killed).
package enum TestDatabase {
    private static let cluster = Mutex<ThrowawayPostgres?>(nil)
    package static let logger: Logger = {
        var logger = Logger(label: "tests")
        logger.logLevel = .error
        return logger
    }()

    /// The server's URL (its `postgres` database).
    package static func serverURL() throws -> DatabaseURL {
        if let configured = ProcessInfo.processInfo.environment["DATABASE_URL"], !configured.isEmpty {
            return try DatabaseURL(configured)
        }
        return try cluster.withLock { cluster in
            if let cluster { return try DatabaseURL(cluster.url()) }
            let started = try ThrowawayPostgres.start()
            cluster = started
            atexit { TestDatabase.stopCluster() }
            return try DatabaseURL(started.url())
        }
    }

    static func stopCluster() {
        cluster.withLock { $0?.stop() }
    }

    /// Creates an empty database and returns its URL.
    package static func freshDatabase() async throws -> DatabaseURL {
        let server = try serverURL()
        let name = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        _ = try await LedgerDatabase.withClient(server, logger: logger) { client in
            // Database names cannot be bound parameters; this one is made of hex digits only.
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        return server.with(database: String(name))
    }

    /// Runs `body` with a client on a fresh database, migrated when `migrated` is true.
    package static func withFreshLedger<Result: Sendable>(
        migrated: Bool = true,
        _ body: @Sendable (PostgresClient, DatabaseURL) async throws -> Result
    ) async throws -> Result {
        let url = try await freshDatabase()
        return try await LedgerDatabase.withClient(url, logger: logger) { client in
            if migrated { _ = try await Migrator().migrate(client, logger: logger) }
            return try await body(client, url)
        }
    }
}

extension DatabaseURL {
    /// The URL as text for DATABASE_URL, password included (tests only).
    package var connectionString: String {
        let credentials = password.map { "\(user):\($0)" } ?? user
        var text = "postgresql://\(credentials)@\(host):\(port)/\(database)"
        if let socketDirectory { text += "?host=\(socketDirectory)" }
        return text
    }
}
