import Logging
import PostgresNIO

/// Opens the ledger's database for the duration of a closure: a `PostgresClient` whose
/// `run()` lives in a child task and is cancelled (connections closed) when the closure ends.
public enum LedgerDatabase {
    public static func withClient<Result: Sendable>(
        _ url: DatabaseURL,
        logger: Logger,
        _ body: @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let client = PostgresClient(configuration: url.clientConfiguration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }
}
