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
                #expect(LedgerFailure(error)?.kind == .other)
            }
        }
        #expect(LedgerFailure(CancellationError()) == nil)
    }
}
