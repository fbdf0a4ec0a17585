import Ledger
import Testing

@Suite("Migration plan and SQL script splitting, without a database")
struct MigrationPlanTests {
    let first = Migration(version: 1, name: "0001_a.sql", text: "CREATE TABLE a (x int);")
    let second = Migration(version: 2, name: "0002_b.sql", text: "CREATE TABLE b (x int);")

    @Test func aFreshDatabaseGetsEveryMigrationInOrder() {
        #expect(MigrationPlan(available: [second, first], applied: []) == .apply([first, second]))
    }

    @Test func onlyMigrationsNotYetAppliedArePlanned() {
        let applied = [AppliedMigration(version: 1, name: first.name, checksum: first.checksum)]
        #expect(MigrationPlan(available: [first, second], applied: applied) == .apply([second]))
    }

    @Test func anEditedAppliedFileRefusesThePlan() {
        let applied = [AppliedMigration(version: 1, name: first.name, checksum: "0123456789abcdef")]
        guard case .refuse(let reason) = MigrationPlan(available: [first, second], applied: applied) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(reason.contains("was edited after it was applied"))
    }

    @Test func anAppliedVersionThisBuildLacksRefusesThePlan() {
        let applied = [AppliedMigration(version: 7, name: "0007_x.sql", checksum: "x")]
        guard case .refuse(let reason) = MigrationPlan(available: [first], applied: applied) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(reason.contains("newer appstore-reconcile"))
    }

    @Test func fileNamesWithoutANumberAreNotMigrations() {
        #expect(Migration(fileName: "notes.sql", text: "") == nil)
        #expect(Migration(fileName: "0003_x.txt", text: "") == nil)
        #expect(Migration(fileName: "0003_x.sql", text: "")?.version == 3)
    }

    @Test func scriptSplitsOnSemicolonsOutsideQuotesCommentsAndDollarBodies() {
        let script = """
            -- a comment; with a semicolon
            CREATE TABLE t (a text DEFAULT 'x;y', "odd;name" int);
            /* block; comment /* nested; */ still comment */
            INSERT INTO t VALUES ('it''s; fine', 1);
            CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql;
            SELECT $$a;b$$;
            SELECT $1::int
            """
        let statements = SQLScript.statements(in: script)
        #expect(statements == [
            "CREATE TABLE t (a text DEFAULT 'x;y', \"odd;name\" int)",
            "INSERT INTO t VALUES ('it''s; fine', 1)",
            "CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql",
            "SELECT $$a;b$$",
            "SELECT $1::int",
        ])
    }

    @Test func theBundledLedgerMigrationSplitsIntoItsStatements() throws {
        let ledger = try #require(Migration.bundled.first)
        let statements = ledger.statements
        #expect(statements.first == "CREATE SCHEMA IF NOT EXISTS app_store")
        #expect(statements.contains { $0.hasPrefix("CREATE TABLE IF NOT EXISTS app_store.notifications") })
        #expect(statements.allSatisfy { !$0.contains("--") }, "comments are dropped")
    }
}
