import Logging
package import PostgresNIO

/// Converts the signed payloads a ledger stored as text before migration 0021 into signed
/// objects, one short transaction per batch (`app_store.convert_stored_jws`), while `serve` and
/// runs go on using the ledger: each batch holds its rows' locks only for its own fraction of a
/// second, and records where it stopped, so an interrupted `migrate` resumes there.
package struct StoredJWSConversion: Sendable {
    package var batchSize: BatchSize

    package init(batchSize: BatchSize = BatchSize()) {
        self.batchSize = batchSize
    }

    package struct Outcome: Hashable, Sendable {
        /// Batches run (0: nothing was left to convert, as in every ledger made after 0021).
        package var batches = 0
        /// The longest batch's time in the server, from its statement's start to its end: how long
        /// its rows were locked (its commit follows at once).
        package var longestBatch: Duration = .zero
    }

    /// How many rows the next batch takes: doubled while batches take under half the target
    /// time, halved when one takes longer than it, within `range`.
    package struct BatchSize: Hashable, Sendable {
        package var rows: Int
        package var target: Duration
        package var range: ClosedRange<Int>

        package init(rows: Int = 100, target: Duration = .milliseconds(50), range: ClosedRange<Int> = 10...500) {
            self.rows = rows
            self.target = target
            self.range = range
        }

        package func next(after took: Duration) -> BatchSize {
            var next = self
            if took > target {
                next.rows = max(range.lowerBound, rows / 2)
            } else if took < target / 2 {
                next.rows = min(range.upperBound, rows * 2)
            }
            return next
        }
    }

    package func run(on connection: PostgresConnection, logger: Logger) async throws -> Outcome {
        let installed = try await connection.query(
            "SELECT to_regprocedure('app_store.convert_stored_jws(integer)') IS NOT NULL", logger: logger
        ).collect().first?.decode(Bool.self) ?? false
        guard installed else { return Outcome() }
        var outcome = Outcome()
        var size = batchSize
        while true {
            let row = try await connection.query(
                """
                SELECT app_store.convert_stored_jws(\(Int32(clamping: size.rows))),
                    extract(epoch FROM clock_timestamp() - statement_timestamp())::float8
                """,
                logger: logger
            ).collect().first
            guard let (more, seconds) = try row?.decode((Bool, Double).self), more else { return outcome }
            let took = Duration.milliseconds(Int64(seconds * 1000))
            outcome.batches += 1
            outcome.longestBatch = max(outcome.longestBatch, took)
            size = size.next(after: took)
        }
    }
}
