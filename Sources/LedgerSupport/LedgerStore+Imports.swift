import Foundation
import Ledger
import Logging
import PostgresNIO
package import SignedData

/// An import's checkpoint (migration 0025): how far an input was imported, and the accounts it
/// imported, keyed by the input's content, so that the same input started again goes on where it
/// stopped without asking Apple about what it had finished.
package struct ImportCheckpoint: Sendable, Equatable {
    /// Hex SHA-256 of the input's kind and bytes.
    package var inputSHA256: String
    /// Every line up to this one (1-based) was imported or reported.
    package var linesDone: Int
    /// Whether an earlier run of this input had started it.
    package var resumed: Bool
    package var finished: Bool
}

extension LedgerStore {
    /// Starts an import of this input, or finds the one an earlier run of it started.
    package func startImport(pair: AppStorePair, inputSHA256: String, kind: String, linesTotal: Int) async throws -> ImportCheckpoint {
        let rows = try await client.query(
            """
            INSERT INTO app_store.imports AS i (bundle_id, environment, input_sha256, kind, lines_total)
            VALUES (\(pair.bundleId), \(pair.environment.rawValue), \(inputSHA256), \(kind), \(Int64(linesTotal)))
            ON CONFLICT (bundle_id, environment, input_sha256) DO UPDATE SET updated_at = now()
            RETURNING i.lines_done, i.started_at < i.updated_at, i.finished_at IS NOT NULL
            """,
            logger: logger
        )
        for try await (done, resumed, finished) in rows.decode((Int64, Bool, Bool).self) {
            return ImportCheckpoint(inputSHA256: inputSHA256, linesDone: Int(done), resumed: resumed, finished: finished)
        }
        throw ImportCheckpointMissing()
    }

    /// Of these transaction IDs, those whose account this import has imported: ID → account.
    package func importedAccounts(of transactionIds: [String], pair: AppStorePair, inputSHA256: String) async throws -> [String: String] {
        guard !transactionIds.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            SELECT DISTINCT ON (ids.id) ids.id, ia.account_id
            FROM unnest(\(transactionIds)::text[]) AS ids(id)
            JOIN app_store.transactions t
              ON t.bundle_id = \(pair.bundleId) AND t.environment = \(pair.environment.rawValue) AND t.transaction_id = ids.id
            JOIN app_store.account_members m
              ON m.bundle_id = t.bundle_id AND m.environment = t.environment AND m.original_transaction_id = t.original_transaction_id
            JOIN app_store.import_accounts ia
              ON ia.bundle_id = m.bundle_id AND ia.environment = m.environment AND ia.input_sha256 = \(inputSHA256) AND ia.account_id = m.account_id
            """,
            logger: logger
        )
        var found: [String: String] = [:]
        for try await (id, account) in rows.decode((String, String).self) { found[id] = account }
        return found
    }

    /// Records that the account of `customer` (an originalTransactionId the last repair saw) was
    /// imported from `line`, and that every line up to `doneThrough` is done. Returns false when
    /// this import had imported that account already.
    package func recordImported(customer: String?, line: Int, doneThrough: Int, pair: AppStorePair, inputSHA256: String) async throws -> Bool {
        let rows = try await client.query(
            """
            WITH account AS (
                SELECT account_id FROM app_store.account_members
                WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND original_transaction_id = \(customer)
            ), added AS (
                INSERT INTO app_store.import_accounts (bundle_id, environment, input_sha256, account_id, line)
                SELECT \(pair.bundleId), \(pair.environment.rawValue), \(inputSHA256), account_id, \(Int64(line)) FROM account
                ON CONFLICT DO NOTHING RETURNING 1
            ), advanced AS (
                UPDATE app_store.imports SET lines_done = greatest(lines_done, \(Int64(doneThrough))), updated_at = now()
                WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND input_sha256 = \(inputSHA256)
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM account), (SELECT count(*) FROM advanced)
            """,
            logger: logger
        )
        for try await (added, known, _) in rows.decode((Int64, Int64, Int64).self) { return added > 0 || known == 0 }
        return true
    }

    /// Every line up to `line` is done (reported, or naming an account imported already).
    package func advanceImport(to line: Int, finished: Bool, pair: AppStorePair, inputSHA256: String) async throws {
        _ = try await client.query(
            """
            UPDATE app_store.imports SET lines_done = greatest(lines_done, \(Int64(line))), updated_at = now(),
                finished_at = CASE WHEN \(finished) THEN now() ELSE finished_at END
            WHERE bundle_id = \(pair.bundleId) AND environment = \(pair.environment.rawValue) AND input_sha256 = \(inputSHA256)
            """,
            logger: logger
        )
    }
}

/// The checkpoint row was neither found nor made: the database answered nothing.
package struct ImportCheckpointMissing: Error, CustomStringConvertible {
    package var description: String { "the ledger recorded no checkpoint for the import" }
}
