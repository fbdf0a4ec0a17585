import AppStoreSimulator
@testable import Decisions
import Foundation
import Ledger
import NIOHTTP1
import PostgresNIO
import Reconciliation
import TestSupport
import Testing
import ThrowawayPostgres

/// A handler's URL may hold a token in its path or query, and its credential goes in a header
/// read from the environment (issue 31, point 6): the handler gets them, and nothing else does.
/// `serve --forward-to`, `deliver` and a `run --deliver-to` are run through the built binary
/// at debug log level; their whole output, the report's files, /metrics and every table of the
/// ledger are searched for the secrets.
@Suite("Forward URLs and credentials stay secret")
struct ForwardSecretsTests {
    static let pathSecret = "p4thS3cretSegment"
    static let querySecret = "qu3ryS3cretToken"
    static let headerSecret = "h3aderS3cretBearer"

    /// Every row of every table of the ledger, as text.
    static func ledgerText(_ url: DatabaseURL) async throws -> String {
        try await LedgerDatabase.withClient(url, logger: TestDatabase.logger) { client in
            var tables: [String] = []
            for try await name in try await client.query(
                "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'app_store'",
                logger: TestDatabase.logger
            ).decode(String.self) {
                tables.append(name)
            }
            var text = ""
            for table in tables {
                for try await row in try await client.query(PostgresQuery(unsafeSQL: "SELECT t::text FROM \(table) t"), logger: TestDatabase.logger).decode(String.self) {
                    text += row + "\n"
                }
            }
            return text
        }
    }

    @Test func noLogLineReportTableOrMetricHoldsAForwardURLsPathQueryOrCredential() async throws {
        let harness = try RecoveryHarness(customers: 30, seed: 341, outageHours: 30)
        let (cluster, url, scratch) = try await ServeCommandTests.world(harness, "forward-secrets")
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(atPath: scratch)
        }
        // Refuses the first three POSTs (their answers are recorded in the ledger), then accepts.
        let handler = WebhookReceiver { index in index < 3 ? 503 : 200 }
        try await handler.withRunning { handlerURL in
            let base = handlerURL.replacingOccurrences(of: "/apple/notifications", with: "")
            let secretURL = base + "/hooks/\(Self.pathSecret)?token=\(Self.querySecret)"
            let environment = ["HANDLER_TOKEN": Self.headerSecret, "APPSTORE_LOG_LEVEL": "debug"]
            var output = ""

            let (server, serve, log) = try await ServeCommandTests.startServe(
                harness, url, scratch: scratch,
                arguments: ["--forward-to", secretURL, "--forward-header", "Authorization: Bearer $HANDLER_TOKEN"], environment: environment)
            let bodies = try harness.scenario.notifications.prefix(5).map { "{\"signedPayload\":\"\(try harness.api.signNotification($0))\"}" }
            for body in bodies {
                #expect(try await ServeCommandTests.post(server + "/apple/notifications", body).0 == 200)
            }
            let deadline = Date().addingTimeInterval(60)
            // Delivery is at least once: a POST the handler accepted after serve's --forward-timeout
            // (a loaded machine) is sent again, so the notifications accepted are counted, not the POSTs.
            func accepted() -> Int { Set(handler.received.filter { $0.status < 300 }.map(\.body)).count }
            while accepted() < 5, Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
            #expect(accepted() == 5, "every notification forwarded")
            #expect(handler.received.allSatisfy { $0.authorization == "Bearer \(Self.headerSecret)" && $0.path == "/hooks/\(Self.pathSecret)" })
            output += try await ServeCommandTests.post(server + "/metrics", "", method: .GET).1
            serve.send(SIGTERM)
            #expect(await serve.waitAsync() == 0)
            output += (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""

            // deliver --list and deliver, with the same URL and header.
            let deliverEnvironment = environment.merging(["DATABASE_URL": url.connectionString]) { _, new in new }
            for arguments in [["--list"], []] {
                let result = try await BuiltBinary.run(
                    ["deliver", "--to", secretURL, "--header", "Authorization: Bearer $HANDLER_TOKEN"] + arguments, environment: deliverEnvironment)
                #expect(result.status == 0, "\(result.standardError.suffix(400))")
                output += result.standardOutput + result.standardError
            }

            // A run re-delivering to the same handler, its report written.
            let reports = scratch + "/reports"
            output += try await SimulatorServer.withRunning(harness.api) { apiURL in
                let files = try SimulatorFiles.write(for: harness.api, in: scratch + "/run")
                var runEnvironment = Dictionary(uniqueKeysWithValues: files.environment(for: harness.api, baseURL: apiURL))
                runEnvironment.merge(deliverEnvironment) { _, new in new }
                let window = try harness.window()
                let result = try await BuiltBinary.run(
                    [
                        "run", "--start", window.start.formatted(.iso8601), "--end", window.end.formatted(.iso8601), "--no-progress", "--report-dir", reports,
                        "--deliver-to", secretURL, "--deliver-header", "Authorization: Bearer $HANDLER_TOKEN",
                    ],
                    environment: runEnvironment)
                #expect([0, 3].contains(result.status), "\(result.standardError.suffix(600))")
                return result.standardOutput + result.standardError
            }
            #expect(handler.received.count > 8, "the run delivered what it recovered too")
            for file in (try? FileManager.default.subpathsOfDirectory(atPath: reports)) ?? [] {
                output += (try? String(contentsOfFile: reports + "/" + file, encoding: .utf8)) ?? ""
            }
            let namesHost = output.contains("127.0.0.1")
            #expect(namesHost, "the output does name the handler's host")

            // Booleans first: a failure message quoting megabytes of output helps nobody.
            let ledger = try await Self.ledgerText(url)
            let keyedByDigest = ledger.contains("#query-sha256=")
            #expect(keyedByDigest, "the deliveries are keyed without the query")
            for secret in [Self.pathSecret, Self.querySecret, Self.headerSecret] {
                let leaked = output.contains(secret)
                #expect(!leaked, "\(secret) in the output, logs, report or metrics")
            }
            for secret in [Self.querySecret, Self.headerSecret] {
                let leaked = ledger.contains(secret)
                #expect(!leaked, "\(secret) in the ledger")
            }
        }
    }
}
