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

    /// Without sslmode, a server over the network is reached only with its certificate checked
    /// (name included); this machine keeps `prefer`, a Unix socket no TLS.
    @Test func withoutSSLModeARemoteHostIsVerifyFullAndOnlyThisMachineIsPrefer() throws {
        #expect(try DatabaseURL("postgresql://u@db.internal/ledger").sslMode == .verifyFull)
        #expect(try DatabaseURL("postgresql://u@10.0.0.5:5432/ledger").sslMode == .verifyFull)
        #expect(try DatabaseURL("postgresql://u@db.internal/ledger?sslmode=disable").sslMode == .disable)
        for local in ["localhost", "127.0.0.1", "127.0.0.2", "[::1]"] {
            #expect(try DatabaseURL("postgresql://u@\(local):5432/ledger").sslMode == .prefer, "\(local)")
        }
        #expect(try DatabaseURL("postgresql://u@localhost/ledger?host=/run/postgresql").sslMode == .disable)
        #expect(try DatabaseURL("postgresql://u@127.0.0.1.example.com/ledger").sslMode == .verifyFull, "a name that starts like an address is a name")
    }

    @Test func otherSchemesAndUnknownSSLModesAreRejected() {
        #expect(throws: DatabaseURLError.self) { try DatabaseURL("mysql://x@y/z") }
        #expect(throws: DatabaseURLError.self) { try DatabaseURL("not a url") }
        #expect(throws: DatabaseURLError.self) { try DatabaseURL("postgres://x@y/z?sslmode=sometimes") }
    }
}
