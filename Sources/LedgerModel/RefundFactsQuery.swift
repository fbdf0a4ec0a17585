import Foundation

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
    package var runSQL: String {
        "SELECT facts.* FROM \(Self.parameters) CROSS JOIN LATERAL (\n\(sql)\n) AS facts"
    }

    /// What is wrong with the result's column types the server reported (`typesSQL`'s row, in
    /// `columns`' order; nil for a column the query does not give), or nil when nothing is.
    package func columnProblem(types: [String?]) -> RefundFactsError? {
        for ((column, allowed), type) in zip(Self.columns, types + Array(repeating: nil, count: max(0, Self.columns.count - types.count))) {
            guard let type, allowed.contains(type) else {
                return RefundFactsError(file: file, problem: "gives \(column) as \(type ?? "nothing"); it must be \(allowed.sorted().joined(separator: " or "))")
            }
        }
        return nil
    }

    /// The query wrapped so that the server parses it, resolves its columns and reports their
    /// types without running it: a row of the columns' type names (LIMIT 0 inside a lateral join
    /// to one row: the query's own plan is never executed).
    package var typesSQL: String {
        let types = Self.columns.map { "pg_typeof(facts.\($0.key))::text" }.joined(separator: ", ")
        return "SELECT \(types) FROM \(Self.parameters) LEFT JOIN LATERAL (SELECT * FROM (\n\(sql)\n) AS query LIMIT 0) AS facts ON true"
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
