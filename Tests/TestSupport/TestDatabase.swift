import Foundation
package import Ledger
package import Logging
package import PostgresNIO
import Synchronization
import ThrowawayPostgres

/// Databases for tests. With `DATABASE_URL` set, each test gets a fresh database on that
/// server; otherwise on one throwaway cluster per test process, started on first use and
/// stopped at exit (its watchdog removes it even if the process is killed).
///
/// A migrated database is a copy of a template the process migrates once (`CREATE DATABASE …
/// TEMPLATE`): copying a few megabytes costs less than running every migration for every test.
/// Tests of the migrations themselves start from an empty database (`migrated: false`).
package enum TestDatabase {
    private static let cluster = Mutex<ThrowawayPostgres?>(nil)
    /// The migrated template's name, made once per process on first use.
    private static let template = Mutex<Task<String, any Error>?>(nil)
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
        try await createDatabase(copying: nil)
    }

    /// Creates a database with every migration applied and returns its URL.
    package static func migratedDatabase() async throws -> DatabaseURL {
        let task = template.withLock { task in
            if let task { return task }
            let made = Task { try await makeTemplate() }
            task = made
            return made
        }
        return try await createDatabase(copying: try await task.value)
    }

    private static func makeTemplate() async throws -> String {
        let url = try await createDatabase(copying: nil, prefix: "template_")
        // The client's connections are closed when this returns: a database with a session open
        // cannot be copied.
        try await LedgerDatabase.withClient(url, logger: logger) { client in
            _ = try await Migrator().migrate(client, logger: logger)
        }
        return url.database
    }

    private static func createDatabase(copying template: String?, prefix: String = "test_") async throws -> DatabaseURL {
        let server = try serverURL()
        let name = prefix + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        // Database names cannot be bound parameters; these are a fixed prefix and hex digits only.
        let statement = template.map { "CREATE DATABASE \(name) TEMPLATE \($0)" } ?? "CREATE DATABASE \(name)"
        try await LedgerDatabase.withClient(server, logger: logger) { client in
            var attempt = 0
            while true {
                do {
                    try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    return
                } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55006" && attempt < 50 {
                    // object_in_use: the template's last session is still closing on the server.
                    attempt += 1
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        }
        return server.with(database: String(name))
    }

    /// Runs `body` with a client on a fresh database, migrated when `migrated` is true.
    package static func withFreshLedger<Result: Sendable>(
        migrated: Bool = true,
        _ body: @Sendable (PostgresClient, DatabaseURL) async throws -> Result
    ) async throws -> Result {
        let url = migrated ? try await migratedDatabase() : try await freshDatabase()
        return try await LedgerDatabase.withClient(url, logger: logger) { client in
            try await body(client, url)
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
