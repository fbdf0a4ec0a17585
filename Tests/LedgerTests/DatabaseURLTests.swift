import Ledger
import PostgresNIO
import Testing

@Suite("DATABASE_URL parsing")
struct DatabaseURLTests {
    @Test func aFullURLIsParsedAndItsPasswordNeverPrinted() throws {
        let url = try DatabaseURL("postgresql://ledger:s3cr%40t@db.internal:6543/subs?sslmode=require")
        #expect(url.user == "ledger")
        #expect(url.password == "s3cr@t")
        #expect(url.host == "db.internal")
        #expect(url.port == 6543)
        #expect(url.database == "subs")
        #expect(url.sslMode == .require)
        #expect(!url.description.contains("s3cr"))
        #expect(url.description == "postgresql://ledger:***@db.internal:6543/subs")
    }

    @Test func aUnixSocketDirectoryComesFromTheHostParameter() throws {
        let url = try DatabaseURL("postgres://postgres@localhost/postgres?host=/tmp/pg")
        #expect(url.socketDirectory == "/tmp/pg")
        #expect(url.clientConfiguration.unixSocketPath == "/tmp/pg/.s.PGSQL.5432")
    }

    @Test func otherSchemesAndUnknownSSLModesAreRejected() {
        #expect(throws: DatabaseURLError.self) { try DatabaseURL("mysql://x@y/z") }
        #expect(throws: DatabaseURLError.self) { try DatabaseURL("not a url") }
        #expect(throws: DatabaseURLError.self) { try DatabaseURL("postgres://x@y/z?sslmode=sometimes") }
    }
}
