import Ledger
import PostgresNIO
import TestSupport
import Testing

/// Database errors classified by what the operator does about them, from a real server.
@Suite("Ledger failures, classified")
struct LedgerFailureTests {
    @Test func anErrorInsideATransactionIsClassifiedByTheDatabasesErrorItWraps() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            do {
                try await client.withTransaction(logger: TestDatabase.logger) { connection in
                    _ = try await connection.query("SELECT * FROM app_store.no_such_table", logger: TestDatabase.logger)
                }
                Issue.record("the query should have failed")
            } catch {
                #expect(!(error is PSQLError), "PostgresNIO wraps it: \(type(of: error))")
                #expect(LedgerFailure(error)?.kind == .schemaMissing)
                #expect(LedgerFailure(error)?.description.contains("42P01") == true)
            }
        }
    }

    @Test func aBareDatabaseErrorIsClassifiedAndOtherErrorsAreNot() async throws {
        try await TestDatabase.withFreshLedger { client, _ in
            do {
                _ = try await client.query("SELECT 1/0", logger: TestDatabase.logger)
                Issue.record("the query should have failed")
            } catch {
                #expect(LedgerFailure(error)?.kind == .refusedInput, "a data exception (22012): the input, not the circumstances")
            }
            do {
                _ = try await client.query("SELECT relname FROM pg_class WHERE", logger: TestDatabase.logger)
                Issue.record("the query should have failed")
            } catch {
                #expect(LedgerFailure(error)?.kind == .other, "a syntax error (42601)")
            }
        }
        #expect(LedgerFailure(CancellationError()) == nil)
    }
}
