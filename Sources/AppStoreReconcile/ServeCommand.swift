import AppStoreServerAPI
import ArgumentParser
import Foundation
import HTTPTypes
import Hummingbird
import Ledger
import Logging
import NIOCore
import PostgresNIO
import Reconciliation
import ServiceLifecycle
import SignedData
import UnixSignals

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive Apple's live notifications: verify each and record it in the ledger, as ingest does.",
        discussion: """
            Point App Store Connect's App Store Server Notifications URL (Version 2) at --path through your TLS \
            reverse proxy or load balancer. Each POST {"signedPayload": "…"} goes through the same verify-and-record \
            path as ingest and the runs; then nightly finds whatever serve missed.

            Answers: 200 recorded, or already recorded (Apple's retry of a delivery that did arrive); 400 a body that \
            is not Apple's (not JSON with a signedPayload, or over 256 KB) or a payload that fails verification \
            (kept in app_store.rejected_payloads, never applied); 503 anything temporary (the database unreachable, \
            a revocation check that could not be made), so that Apple retries; 404 another path; 405 another method. \
            A 200 is sent only after the notification is committed.

            Certificates: by default checked as of each payload's signedDate (for a live notification, seconds ago), \
            as ingest and the runs do. --online-checks checks them at the current time with OCSP revocation checks; \
            a responder that cannot be reached makes the answer 503, so a notification is retried, never lost. \
            A chain's good answer is kept 15 minutes (never past a certificate's expiry); failures are never kept.

            --forward-to URL: each notification recorded is also queued for your own handler in the same statement; \
            a background sender POSTs Apple's body to it and retries until a 2xx, so a failing handler never fails \
            Apple's delivery. What is left when serve stops is sent when it starts again (or by deliver --to URL).

            GET /healthz: 200 when the database answers and every migration is applied, else 503 (readiness). \
            GET /livez: 200 while the process answers, without asking the database (liveness). GET /metrics: \
            Prometheus text (requests by outcome, rejections by reason, a latency histogram, pending forwards).

            SIGTERM or SIGINT: stops accepting connections, answers every request it has begun to read, exits 0 \
            within 15 s (exit 75 if a request is still unanswered then; Apple sends it again). Logs are JSON \
            lines when not on a terminal (APPSTORE_LOG_FORMAT); no payload or secret is logged.
            """
    )

    @Option(help: ArgumentHelp("Where to listen.", valueName: "host:port"))
    var listen = "127.0.0.1:8080"

    @Option(help: "The path Apple POSTs to.")
    var path = "/apple/notifications"

    @Option(help: ArgumentHelp(
        "After recording, hand each notification to your own webhook handler at this URL (https, or http to loopback; APPSTORE_FORWARD_TO), through the ledger's delivery table: a failing handler never fails Apple's delivery, and nothing is lost.",
        valueName: "url"))
    var forwardTo: String?

    func forwardTarget(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DeliveryTarget? {
        guard let text = forwardTo ?? environment["APPSTORE_FORWARD_TO"].flatMap({ $0.isEmpty ? nil : $0 }) else { return nil }
        do { return try DeliveryTarget(text) } catch let error as DeliveryTargetError { throw ValidationError("--forward-to \(error.description)") }
    }

    @Flag(help: "Check certificates at the current time, with OCSP revocation checks (a responder out of reach: 503, Apple retries).")
    var onlineChecks = false

    @Option(help: "Log lines as 'text' or 'json'. Default: text on a terminal, json otherwise (APPSTORE_LOG_FORMAT).")
    var logFormat: LogFormat?

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        _ = try Self.address(listen)
        _ = try forwardTarget()
        guard path.hasPrefix("/"), !["/healthz", "/livez", "/metrics"].contains(path) else {
            throw ValidationError("--path must start with / and not be /healthz, /livez or /metrics")
        }
    }

    static func address(_ text: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
            throw ValidationError("--listen must be HOST:PORT, such as 127.0.0.1:8080 or 0.0.0.0:8080")
        }
        let host = String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        guard !host.isEmpty else { throw ValidationError("--listen must be HOST:PORT, such as 127.0.0.1:8080") }
        return (host, port)
    }

    func run() async throws {
        try await withExitStatus(logFormat: logFormat, job: true) {
            let settings = options.settings
            var configuration = try settings.verifierConfiguration()
            if onlineChecks { configuration.onlineChecks = OnlineChecks(transport: HTTPOCSPTransport()) }
            let verifier = try SignedDataVerifier(configuration)
            let databaseURL = try settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.serve")
            try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
            let (host, port) = try Self.address(listen)
            let limits = BatchedIngest.Limits()
            // A batch's statements end by the server's clock before a request's answer is due.
            let database = LedgerDatabase.client(databaseURL, logger: logger, statementTimeout: limits.write)
            let store = LedgerStore(client: database, logger: logger)
            let target = try forwardTarget()
            let forwarder = target.map { NotificationForwarder(store: store, target: $0, logger: logger) }
            let ingest = NotificationIngest(verifier: verifier, store: store, deliverTo: target?.url)
            let batched = BatchedIngest(ingest: ingest, limits: limits)
            let receiver = NotificationReceiver(ingest: ingest, batched: batched)
            let metrics = ServeMetrics()
            let path = self.path
            let inFlight = RequestsInFlight()
            let responder = CallbackResponder<BasicRequestContext> { request, _ in
                await inFlight.track {
                    await Self.respond(to: request, path: path, receiver: receiver, forwarder: forwarder, metrics: metrics, database: database, logger: logger)
                }
            }
            var quiet = logger
            if quiet.logLevel > .warning { quiet.logLevel = .warning }
            let application = Application(
                responder: responder,
                configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "appstore-reconcile"),
                onServerRunning: { channel in
                    printError("serve: listening on \(host):\(channel.localAddress?.port ?? port), POST \(path)" + (target.map { ", forwarding to \($0.description)" } ?? ""))
                },
                logger: quiet
            )
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    // Stopped last to first: the listener, the forwarder, the batch writers, the database.
                    services: [.init(service: database), .init(service: batched)] + (forwarder.map { [ServiceGroupConfiguration.ServiceConfiguration(service: $0)] } ?? []) + [
                        .init(service: application, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
                    ],
                    gracefulShutdownSignals: [.sigterm, .sigint], logger: quiet
                )
            )
            let watch = await ServeShutdown.watch(inFlight, answering: receiver.deadline, linger: .seconds(3))
            defer { watch.cancel() }
            try await group.run()
            printError("serve: stopped")
        }
    }

    static func respond(
        to request: Request, path: String, receiver: NotificationReceiver, forwarder: NotificationForwarder?, metrics: ServeMetrics,
        database: PostgresClient, logger: Logger
    ) async -> Response {
        switch (request.uri.path, request.method) {
        case (path, .post):
            let started = ContinuousClock.now
            var request = request
            let body = try? await request.collectBody(upTo: NotificationReceiver.maximumBodyBytes)
            let answer = await receiver.answer(body: body.map { Array($0.readableBytesView) })
            let elapsed = ContinuousClock.now - started
            metrics.record(answer, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            if answer.status != 200 { logger.notice("answered \(answer.status): \(answer.outcome)") }
            if answer == .recorded { forwarder?.wake() }
            var response = text(answer.status, answer.text)
            if let seconds = answer.retryAfter { response.headers[.retryAfter] = String(seconds) }
            return response
        case (path, _):
            metrics.record(other: "method_not_allowed")
            var response = text(405, "method not allowed: POST only\n")
            response.headers[.allow] = "POST"
            return response
        case ("/livez", .get):
            // The process answers: no database call, so a database outage never restarts the pod.
            metrics.record(other: "health")
            return text(200, "ok\n")
        case ("/healthz", .get):
            metrics.record(other: "health")
            do {
                guard let applied = try await NotificationReceiver.within(.seconds(3), { try await Migrator().applied(database, logger: logger) }) else {
                    return text(503, "the database is unavailable\n")
                }
                let expected = Migration.bundled.count
                return applied.count >= expected
                    ? text(200, "ok\n") : text(503, "the ledger needs migrations: \(applied.count) of \(expected) applied\n")
            } catch {
                return text(503, "the database is unavailable\n")
            }
        case ("/metrics", .get):
            metrics.record(other: "metrics")
            var pending: Int?
            if let target = forwarder?.redelivery.target {
                let store = receiver.ingest.store
                pending = try? await NotificationReceiver.within(.seconds(3), { try await store.pendingDeliveryCount(to: target.url) }) ?? nil
            }
            var response = text(200, metrics.text(pendingForwards: pending))
            response.headers[.contentType] = "text/plain; version=0.0.4"
            return response
        default:
            metrics.record(other: "not_found")
            return text(404, "not found\n")
        }
    }

    static func text(_ status: Int, _ body: String) -> Response {
        Response(
            status: HTTPResponse.Status(code: status), headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }
}
