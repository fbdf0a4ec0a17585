package import Ledger
package import Logging
package import PostgresNIO
package import Reconciliation
package import ServiceLifecycle
import Synchronization
import UnixSignals

/// Runs a job and the ledger's database client as the services of a swift-service-lifecycle
/// `ServiceGroup`. SIGTERM (cron, systemd, Kubernetes) or SIGINT (a terminal) starts a graceful
/// shutdown: the job, listed last, is told first and stops at its next safe point
/// (`StopRequest`: the batch in hand committed, the run's outcome recorded); only then is the
/// database client shut down. The job's result or error is the caller's, as if it had run directly.
package func withGracefulShutdown<Result: Sendable>(
    databaseURL: DatabaseURL, logger: Logger, _ job: @escaping @Sendable (LedgerStore, StopRequest) async throws -> Result
) async throws -> Result {
    let database = LedgerDatabase.client(databaseURL, logger: logger)
    let store = LedgerStore(client: database, logger: logger)
    let stop = StopRequest()
    let outcome = Mutex<Swift.Result<Result, any Error>?>(nil)
    let service = JobService {
        do {
            let value = try await withGracefulShutdownHandler {
                try await job(store, stop)
            } onGracefulShutdown: {
                stop.request()
            }
            outcome.withLock { $0 = .success(value) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
    }
    try await runUntilDone(service, beside: database, logger: logger)
    guard let result = outcome.withLock({ $0 }) else { throw CancellationError() }
    return try result.get()
}

/// Runs `service` and the ledger's database client as the services of one `ServiceGroup` that
/// SIGTERM and SIGINT stop gracefully; the group ends when `service` returns. `service` is listed
/// last, so a graceful shutdown reaches it first and the database client only after it.
package func runUntilDone(_ service: some Service, beside database: PostgresClient, logger: Logger) async throws {
    let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
            services: [
                .init(service: database),
                .init(service: service, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger
        )
    )
    try await group.run()
}

/// A job that runs once and returns: the group ends when it does.
private struct JobService: Service {
    let body: @Sendable () async -> Void
    func run() async throws { await body() }
}
