import LedgerModel
import Testing

/// The facts query's result columns judged from the types the server reported, without a server.
@Suite struct RefundFactsColumnTests {
    static let query = try! RefundFactsQuery(file: "/etc/facts.sql", text: "SELECT 1")

    @Test func theContractsTypesPassAndAnotherTypeOrAMissingColumnIsNamed() {
        #expect(Self.query.columnProblem(types: ["boolean", "text", "boolean", "integer", "text"]) == nil)
        #expect(Self.query.columnProblem(types: ["boolean", "character varying", "boolean", "bigint", "character varying"]) == nil)
        let wrong = Self.query.columnProblem(types: ["boolean", "text", "boolean", "numeric", "text"])
        #expect(wrong?.description == "the refund facts query /etc/facts.sql gives consumption_percentage as numeric; it must be bigint or integer or smallint")
        let missing = "gives delivery_status as nothing; it must be character varying or text"
        #expect(Self.query.columnProblem(types: ["boolean", nil, "boolean", "integer", "text"])?.problem == missing)
        #expect(Self.query.columnProblem(types: ["boolean"])?.problem == missing, "a short row is columns missing: the first one named")
    }
}
