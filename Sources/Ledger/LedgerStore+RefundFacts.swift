package import Foundation
import LedgerModel
import Logging
import PostgresNIO
package import SignedData

extension RefundFactsQuery {
    /// The six parameters, in order.
    static func bindings(transactionId: String, originalTransactionId: String, appAccountToken: UUID?, productId: String?, pair: AppStorePair) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 6)
        try bindings.append(transactionId)
        try bindings.append(originalTransactionId)
        try bindings.append(appAccountToken)
        try bindings.append(productId)
        try bindings.append(pair.bundleId)
        try bindings.append(pair.environment.rawValue)
        return bindings
    }
}

extension LedgerStore {
    /// Checks the facts query against the ledger's database without running it: it parses, its
    /// parameters' types can be told, and it returns each contract column with a type it may
    /// have. Throws `RefundFactsError` naming the file and what is wrong.
    package func check(_ query: RefundFactsQuery, pair: AppStorePair, timeout: Duration = .seconds(5)) async throws {
        let types: [String?]
        do {
            types = try await client.withTransaction(logger: logger) { connection in
                try await Self.readOnly(connection, timeout: timeout, logger: logger)
                let bindings = try RefundFactsQuery.bindings(transactionId: "0", originalTransactionId: "0", appAccountToken: nil, productId: nil, pair: pair)
                let rows = try await connection.query(PostgresQuery(unsafeSQL: query.typesSQL, binds: bindings), logger: logger)
                var found: [String?] = []
                for try await row in rows {
                    found = try row.makeRandomAccess().indices.map { try row.makeRandomAccess()[$0].decode(String?.self) }
                }
                return found
            }
        } catch {
            if Self.isTheDatabases(error) { throw LedgerFailure(error) ?? error }
            throw RefundFactsError(file: query.file, problem: "does not run: \(Self.serverMessage(error))")
        }
        if let problem = query.columnProblem(types: types) { throw problem }
    }

    /// The facts query's rows for one request, run in a READ ONLY transaction under `timeout`.
    /// Its failure (a timeout included) is a `RefundFactsError`: that request's, not the run's.
    package func refundFacts(
        _ query: RefundFactsQuery, transactionId: String, originalTransactionId: String, appAccountToken: UUID?, productId: String?, pair: AppStorePair,
        timeout: Duration
    ) async throws -> [ConsumptionFacts] {
        do {
            return try await client.withTransaction(logger: logger) { connection in
                try await Self.readOnly(connection, timeout: timeout, logger: logger)
                let bindings = try RefundFactsQuery.bindings(
                    transactionId: transactionId, originalTransactionId: originalTransactionId, appAccountToken: appAccountToken, productId: productId, pair: pair
                )
                let rows = try await connection.query(PostgresQuery(unsafeSQL: query.runSQL, binds: bindings), logger: logger)
                var facts: [ConsumptionFacts] = []
                for try await row in rows {
                    // Two rows are already one too many (`ConsumptionAnswerRules`): the rest are
                    // read to the end of the answer, not kept.
                    guard facts.count < 2 else { continue }
                    let columns = row.makeRandomAccess()
                    for (column, _) in RefundFactsQuery.columns where !columns.contains(column) {
                        throw RefundFactsError(file: query.file, problem: "returned no column \(column)")
                    }
                    facts.append(
                        ConsumptionFacts(
                            customerConsented: try columns["customer_consented"].decode(Bool?.self),
                            deliveryStatus: try columns["delivery_status"].decode(String?.self),
                            sampleContentProvided: try columns["sample_content_provided"].decode(Bool?.self),
                            consumptionPercentage: try columns["consumption_percentage"].decode(Int64?.self),
                            refundPreference: try columns["refund_preference"].decode(String?.self)
                        )
                    )
                }
                return facts
            }
        } catch let error as RefundFactsError {
            throw error
        } catch {
            // The database gone is the run's failure (exit 75, run again), not this request's.
            if Self.isTheDatabases(error) { throw LedgerFailure(error) ?? error }
            throw RefundFactsError(file: query.file, problem: "failed for transaction \(transactionId): \(Self.serverMessage(error))")
        }
    }

    /// READ ONLY, and every statement ended by the server past `timeout`.
    static func readOnly(_ connection: PostgresConnection, timeout: Duration, logger: Logger) async throws {
        try await connection.query("SET TRANSACTION READ ONLY", logger: logger)
        try await connection.query("SELECT set_config('statement_timeout', \(timeout.postgresSetting), true)", logger: logger)
    }

    /// Whether a failure is the database's, not the query's: the connection lost or refused,
    /// the credentials refused, the server shutting down or out of resources (SQLSTATE classes 08,
    /// 28, 53, 57P01–57P03). A statement timeout (57014) and every error of the query's own are not.
    static func isTheDatabases(_ error: any Error) -> Bool {
        switch error {
        case let error as PostgresTransactionError:
            return [error.beginError, error.closureError, error.commitError].contains { $0.map(isTheDatabases) ?? false }
        case let error as PSQLError:
            if [.connectionError, .serverClosedConnection, .uncleanShutdown].contains(error.code) { return true }
            guard let state = error.serverInfo?[.sqlState] else { return false }
            return ["08", "28", "53"].contains(String(state.prefix(2))) || ["57P01", "57P02", "57P03"].contains(state)
        default:
            return false
        }
    }

    /// The server's message for a failure, without the query's text (it is the team's file,
    /// named already) nor the values bound (a data exception's message, class 22, may quote the
    /// value: only its SQLSTATE is given); through the transaction's wrapping.
    static func serverMessage(_ error: any Error) -> String {
        switch error {
        case let error as PostgresTransactionError:
            if let inner = error.closureError ?? error.beginError ?? error.commitError { return serverMessage(inner) }
            return "the transaction failed"
        case let error as PSQLError:
            if let state = error.serverInfo?[.sqlState], state.hasPrefix("22") { return "a value the query could not take or give (SQLSTATE \(state))" }
            return error.serverInfo?[.message] ?? "\(error.code)"
        case let error as PostgresDecodingError: return "column \(error.columnName) holds a value of another type"
        case let error as RefundFactsError: return error.problem
        default: return "\(type(of: error))"
        }
    }
}
