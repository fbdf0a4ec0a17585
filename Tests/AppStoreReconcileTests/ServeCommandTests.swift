import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Ledger
import NIOCore
import NIOHTTP1
import PostgresNIO
import TestSupport
import Testing
import ThrowawayPostgres

@Suite("serve: the live receiver over real HTTP and a real PostgreSQL")
struct ServeCommandTests {
    /// POSTs `body` to `url`; the status and the body of the answer.
    static func post(_ url: String, _ body: String, method: HTTPMethod = .POST) async throws -> (Int, String) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Content-Type", value: "application/json")
        if method == .POST { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        return (Int(response.status.code), text)
    }

    static func count(_ url: DatabaseURL, _ sql: String) async throws -> Int {
        try await LedgerDatabase.withClient(url, logger: TestDatabase.logger) { client in
            for try await value in try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabase.logger).decode(Int.self) { return value }
            return 0
        }
    }

    @Test func aPostIsRecordedOnceRejectedOrRetriedAsAppleNeedsAndSIGTERMEndsServeWithExit0() async throws {
        let harness = try RecoveryHarness(customers: 5, seed: 81)
        let cluster = try ThrowawayPostgres.start()
        defer { cluster.stop() }
        let url = try DatabaseURL(cluster.url())
        try await LedgerDatabase.withClient(url, logger: harness.logger) { client in _ = try await Migrator().migrate(client, logger: harness.logger) }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let files = try SimulatorFiles.write(for: harness.api, in: scratch)
        var environment = Dictionary(uniqueKeysWithValues: files.environment(for: harness.api, baseURL: "http://127.0.0.1:9"))
        environment["DATABASE_URL"] = url.connectionString
        let log = scratch + "/serve.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let descriptor = open(log, O_WRONLY)
        let serve = try ChildProcess.spawn(
            BuiltBinary.path, ["serve", "--listen", "127.0.0.1:0", "--log-format", "text"], environment: BuiltBinary.environment(environment),
            standardError: descriptor
        )
        close(descriptor)
        // The port it bound, from "serve: listening on 127.0.0.1:PORT, POST /apple/notifications".
        var base: String?
        for _ in 0..<600 where base == nil {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: #"listening on 127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                base = "http://" + text[range].dropFirst("listening on ".count)
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let server = try #require(base, "serve started: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let endpoint = server + "/apple/notifications"

        let notification = try #require(harness.scenario.notifications.last)
        let body = "{\"signedPayload\":\"\(try harness.api.signNotification(notification))\"}"
        #expect(try await Self.post(endpoint, body).0 == 200)
        #expect(try await Self.post(endpoint, body).0 == 200, "Apple's retry of a delivery that arrived")
        #expect(try await Self.count(url, "SELECT count(*) FROM app_store.notifications WHERE source = 'webhook'") == 1)

        var tampered = body
        let index = tampered.index(tampered.endIndex, offsetBy: -8)
        tampered.replaceSubrange(index...index, with: tampered[index] == "A" ? "B" : "A")
        #expect(try await Self.post(endpoint, tampered).0 == 400)
        #expect(try await Self.count(url, "SELECT count(*) FROM app_store.rejected_payloads WHERE source = 'webhook'") == 1)
        #expect(try await Self.post(endpoint, "hello").0 == 400)
        #expect(try await Self.post(endpoint, "{\"signedPayload\":\"" + String(repeating: "A", count: 300_000) + "\"}").0 == 400, "oversized")
        #expect(try await Self.post(endpoint, "", method: .GET).0 == 405)
        #expect(try await Self.post(server + "/other", body).0 == 404)
        #expect(try await Self.post(server + "/healthz", "", method: .GET).0 == 200)
        let metrics = try await Self.post(server + "/metrics", "", method: .GET)
        #expect(metrics.1.contains("appstore_reconcile_serve_requests_total{outcome=\"recorded\"} 1"))
        #expect(metrics.1.contains("appstore_reconcile_serve_requests_total{outcome=\"already_recorded\"} 1"))
        #expect(metrics.1.contains("appstore_reconcile_serve_rejections_total{reason=\"bad_signature\"} 1"))
        #expect(metrics.1.contains("appstore_reconcile_serve_request_duration_seconds_count 5"))

        // The database gone: 503, so that Apple retries; back: the same POST is recorded once.
        let another = try #require(harness.scenario.notifications.first { $0.uuid != notification.uuid })
        let anotherBody = "{\"signedPayload\":\"\(try harness.api.signNotification(another))\"}"
        try cluster.crash()
        #expect(try await Self.post(endpoint, anotherBody).0 == 503)
        #expect(try await Self.post(server + "/healthz", "", method: .GET).0 == 503)
        try cluster.restart()
        // The pool reconnects on its own schedule: until then Apple would get 503s and retry.
        var status = 0
        let deadline = Date().addingTimeInterval(90)
        while status != 200, Date() < deadline {
            status = try await Self.post(endpoint, anotherBody).0
            if status != 200 { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(status == 200)
        #expect(try await Self.post(endpoint, anotherBody).0 == 200)
        #expect(try await Self.count(url, "SELECT count(*) FROM app_store.notifications WHERE source = 'webhook'") == 2)

        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(!output.contains(notification.uuid) && !output.contains("signedPayload"), "no payload in the logs")
        serve.send(SIGTERM)
        #expect(await serve.waitAsync() == 0, "SIGTERM: exit 0")
    }
}
