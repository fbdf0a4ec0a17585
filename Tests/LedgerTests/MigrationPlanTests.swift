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

    /// A file amended after release names the earlier text's checksum: a ledger that applied the
    /// earlier text goes on; any other text is still refused. The bundled 0006 and 0011 were
    /// amended this way (migration 0014), and accept the texts ledgers applied before.
    @Test func anAmendedFileAcceptsTheChecksumOfTheTextItAmendsAndNoOther() {
        let amended = Migration(
            version: 1, name: first.name, text: "-- amends checksum \(first.checksum)\nCREATE TABLE IF NOT EXISTS a (x int);"
        )
        let applied = [AppliedMigration(version: 1, name: first.name, checksum: first.checksum)]
        #expect(MigrationPlan(available: [amended, second], applied: applied) == .apply([second]))
        let other = [AppliedMigration(version: 1, name: first.name, checksum: "0123456789abcdef")]
        guard case .refuse = MigrationPlan(available: [amended, second], applied: other) else {
            Issue.record("expected a refusal")
            return
        }
        let bundled = Dictionary(uniqueKeysWithValues: Migration.bundled.map { ($0.version, $0) })
        #expect(bundled[6]?.acceptedChecksums.contains("4ffeeade62975ccf64fe9d6503b4e07c4fd32b66deff15accdcd82a73fde1acb") == true)
        #expect(bundled[11]?.acceptedChecksums.contains("0d27cf367707a6c821d734f4d872a57438a1ab3b12a2265ce41776d5b71f94c7") == true)
        // 0006 and 0011 were amended twice (after 0014, then after 0020) and again for 0021, 0012
        // once (after 0020); 0001, 0005, 0007, 0010, 0014, 0015, 0019 and 0020 once, for 0021.
        #expect(bundled[6]?.acceptedChecksums.count == 4 && bundled[11]?.acceptedChecksums.count == 4 && bundled[12]?.acceptedChecksums.count == 2)
        for version in [1, 5, 7, 10, 14, 15, 19, 20] { #expect(bundled[version]?.acceptedChecksums.count == 2, "\(version)") }
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
