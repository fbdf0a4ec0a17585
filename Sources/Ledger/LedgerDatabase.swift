package import Logging
package import PostgresNIO

/// Opens the ledger's database for the duration of a closure: a `PostgresClient` whose
/// `run()` lives in a child task and is cancelled (connections closed) when the closure ends.
/// One connection is made first, on its own: a pool retries a server that is down without end,
/// while an operator wants to hear at once that it cannot be reached.
package enum LedgerDatabase {
    /// Connects once and disconnects; throws the connection's error (a `PSQLError`).
    package static func checkReachable(_ url: DatabaseURL, logger: Logger) async throws {
        let connection = try await PostgresConnection.connect(configuration: try url.connectionConfiguration(), id: 0, logger: logger)
        try await connection.close()
    }

    /// A client for a swift-service-lifecycle `ServiceGroup` (`PostgresClient` is a `Service`):
    /// the group runs it, and on a graceful shutdown stops it only after the services listed
    /// after it, which use it, have finished (the batch in hand committed, the run's outcome
    /// recorded). Not connected yet: the service that uses it checks the server first
    /// (`checkReachable`), so that a failure to connect is that service's, and reported as such.
    /// A client for a service group to run. With `statementTimeout`, the server ends every
    /// statement of its connections that runs longer (lock waits included), so that a caller
    /// that gives up on an answer after a longer time knows nothing it sent can commit later.
    package static func client(_ url: DatabaseURL, logger: Logger, statementTimeout: Duration? = nil) -> PostgresClient {
        var background = logger
        if background.logLevel > .info { background.logLevel = .error }
        var configuration = url.clientConfiguration
        if let statementTimeout {
            configuration.options.additionalStartupParameters.append(("statement_timeout", statementTimeout.postgresSetting))
        }
        return PostgresClient(configuration: configuration, backgroundLogger: background)
    }

    /// Runs `body` with a client running in a child task, stopped when `body` returns. Not for
    /// use under a `ServiceGroup`: the client stops at the group's graceful shutdown, before
    /// `body` could record how it ended (use `client(_:logger:)` as a service of the group).
    package static func withClient<Result: Sendable>(
        _ url: DatabaseURL,
        logger: Logger,
        _ body: @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        try await checkReachable(url, logger: logger)
        // The first lease may come before `run()` has started in its task, which PostgresNIO
        // reports as a warning on the pool's background logger though nothing is wrong: that
        // logger says only errors unless the operator asked for details (info, debug, trace).
        var background = logger
        if background.logLevel > .info { background.logLevel = .error }
        let client = PostgresClient(configuration: url.clientConfiguration, backgroundLogger: background)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await client.query("SELECT 1", logger: logger)
            return try await body(client)
        }
    }
}

extension Duration {
    /// The duration as a PostgreSQL time setting (`statement_timeout`, `lock_timeout`): whole
    /// milliseconds, at least 1 (0 would mean no limit at all).
    var postgresSetting: String {
        String(max(1, components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000)) + "ms"
    }
}

extension LedgerDatabase {
    /// Runs `body` with the ledger's store over a client that lives as long as `body`
    /// (`withClient`): for a command that reads or writes the ledger and calls nothing else.
    package static func withStore<Result: Sendable>(
        _ url: DatabaseURL, logger: Logger, _ body: @Sendable (LedgerStore) async throws -> Result
    ) async throws -> Result {
        try await withClient(url, logger: logger) { client in try await body(LedgerStore(client: client, logger: logger)) }
    }
}
