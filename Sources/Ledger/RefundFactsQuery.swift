import Foundation
import LedgerModel
import Logging
import PostgresNIO
import SignedData

/// The team's facts query (an app's `refundRequests.facts` file): one SELECT run against the
/// ledger's database in a READ ONLY transaction, under a statement timeout, with the parameters
/// `$1` transaction_id text, `$2` original_transaction_id text, `$3` app_account_token uuid (NULL
/// when none: cast it where its type cannot be told, `$3::uuid`), `$4` product_id text, `$5`
/// bundle_id text, `$6` environment text ('Production' | 'Sandbox'). It returns zero or one row with
/// the columns `customer_consented` boolean, `delivery_status` text, `sample_content_provided`
/// boolean, `consumption_percentage` integer and `refund_preference` text (the last two may be NULL).
/// These names are a contract.
package struct RefundFactsQuery: Sendable, Hashable {
    /// Where the query was read from, for messages.
    package var file: String
    /// The SELECT, without a trailing semicolon.
    package var sql: String

    /// The result's columns and the types each may have.
    package static let columns: KeyValuePairs<String, Set<String>> = [
        "customer_consented": ["boolean"],
        "delivery_status": ["text", "character varying"],
        "sample_content_provided": ["boolean"],
        "consumption_percentage": ["smallint", "integer", "bigint"],
        "refund_preference": ["text", "character varying"],
    ]

    /// The query's text as the file holds it; trailing semicolons and whitespace are dropped.
    package init(file: String, text: String) throws {
        var sql = Substring(text)
        while let last = sql.last, last == ";" || last.isWhitespace { sql = sql.dropLast() }
        guard !sql.isEmpty else { throw RefundFactsError(file: file, problem: "holds no query") }
        guard !sql.contains(";") || Self.onlyInStringsOrComments(sql) else {
            throw RefundFactsError(file: file, problem: "must hold one SELECT, not several statements")
        }
        self.file = file
        self.sql = String(sql)
    }

    /// Reads the file; a file that cannot be read is an error naming it.
    package static func load(_ file: String) throws -> RefundFactsQuery {
        guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
            throw RefundFactsError(file: file, problem: "cannot be read")
        }
        return try RefundFactsQuery(file: file, text: text)
    }

    /// Whether every `;` of `sql` stands in a quoted string or a comment (a rough check: the
    /// server's parser is the judge, `check` runs it).
    static func onlyInStringsOrComments(_ sql: Substring) -> Bool {
        var inString = false
        var inLineComment = false
        var previous: Character = " "
        for character in sql {
            if inLineComment {
                if character == "\n" { inLineComment = false }
            } else if inString {
                if character == "'" { inString = false }
            } else if character == "'" {
                inString = true
            } else if character == "-" && previous == "-" {
                inLineComment = true
            } else if character == ";" {
                return false
            }
            previous = character
        }
        return true
    }

    /// The six parameters, each with its type, read first: the server then knows every
    /// parameter's type wherever the query uses it, or does not use it at all (a NULL bound for a
    /// parameter whose type it cannot tell is an error otherwise).
    static let parameters = "(SELECT $1::text, $2::text, $3::uuid, $4::text, $5::text, $6::text) AS parameters(transaction_id, original_transaction_id, app_account_token, product_id, bundle_id, environment)"

    /// The query as it runs: beside its typed parameters (its text on lines of its own, so that a
    /// comment on its last line ends there).
    var runSQL: String {
        "SELECT facts.* FROM \(Self.parameters) CROSS JOIN LATERAL (\n\(sql)\n) AS facts"
    }

    /// The query wrapped so that the server parses it, resolves its columns and reports their
    /// types without running it: a row of the columns' type names (LIMIT 0 inside a lateral join
    /// to one row: the query's own plan is never executed).
    var typesSQL: String {
        let types = Self.columns.map { "pg_typeof(facts.\($0.key))::text" }.joined(separator: ", ")
        return "SELECT \(types) FROM \(Self.parameters) LEFT JOIN LATERAL (SELECT * FROM (\n\(sql)\n) AS query LIMIT 0) AS facts ON true"
    }

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

/// A facts file that cannot be used: it cannot be read, does not parse, lacks a column or gives
/// one of another type (exit 78, naming the file), or its query failed or ran past its timeout
/// for one request (that request's outcome is `failed`).
package struct RefundFactsError: Error, Hashable, Sendable, CustomStringConvertible {
    package var file: String
    package var problem: String

    package init(file: String, problem: String) {
        self.file = file
        self.problem = problem
    }

    package var description: String { "the refund facts query \(file) \(problem)" }
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
            throw RefundFactsError(file: query.file, problem: "does not run: \(Self.serverMessage(error))")
        }
        for ((column, allowed), type) in zip(RefundFactsQuery.columns, types) {
            guard let type, allowed.contains(type) else {
                throw RefundFactsError(file: query.file, problem: "gives \(column) as \(type ?? "nothing"); it must be \(allowed.sorted().joined(separator: " or "))")
            }
        }
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
            throw RefundFactsError(file: query.file, problem: "failed for transaction \(transactionId): \(Self.serverMessage(error))")
        }
    }

    /// READ ONLY, and every statement ended by the server past `timeout`.
    static func readOnly(_ connection: PostgresConnection, timeout: Duration, logger: Logger) async throws {
        try await connection.query("SET TRANSACTION READ ONLY", logger: logger)
        try await connection.query("SELECT set_config('statement_timeout', \(timeout.postgresSetting), true)", logger: logger)
    }

    /// The server's message for a failure, without the query's text (it is the team's file,
    /// named already) nor the values bound; through the transaction's wrapping.
    static func serverMessage(_ error: any Error) -> String {
        switch error {
        case let error as PostgresTransactionError:
            if let inner = error.closureError ?? error.beginError ?? error.commitError { return serverMessage(inner) }
            return "the transaction failed"
        case let error as PSQLError: return error.serverInfo?[.message] ?? "\(error.code)"
        case let error as PostgresDecodingError: return "column \(error.columnName) holds a value of another type"
        case let error as RefundFactsError: return error.problem
        default: return "\(type(of: error))"
        }
    }
}
