import AppStoreServerAPI
import ArgumentParser
import Decisions
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Ledger
import Logging
import NIOCore
import PostgresNIO
import Reconciliation
import ServiceLifecycle
import SignedData
import Synchronization
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
            a background sender POSTs Apple's body to it (--forward-concurrency at once, fewest attempts first) and \
            retries after pauses that double (1 s to an hour) until a 2xx, so a failing handler never fails Apple's \
            delivery; after --forward-max-attempts it parks the notification as failed (deliver --list, \
            deliver --retry-failed). Give a credential with --forward-header, read from an environment variable or a \
            file, not in the URL: logs show only the URL's scheme and host, and the ledger keys it without its query. \
            What is left when serve stops is sent when it starts again (or by deliver --to URL).

            GET /healthz: 200 when the database answers and every migration is applied, else 503 (readiness). \
            GET /livez: 200 while the process answers, without asking the database (liveness). GET /metrics: \
            Prometheus text (requests by outcome, rejections by reason, a latency histogram, pending forwards).

            Limits, for an endpoint anyone can POST to: --max-connections open connections, --idle-timeout for a \
            connection that sends nothing, --body-timeout to send a body (408 after), --max-reading-megabytes for \
            the bodies still arriving, --max-requests POSTs being verified and recorded, and a queue to the database \
            of 1,000 notifications or 32 MB: past any, 503 with Retry-After: 5 at once, and a request answered 503 \
            is never recorded later. Put a reverse proxy that buffers whole \
            requests and rate-limits by source in front.

            SIGTERM or SIGINT: stops accepting connections, answers every request whose body it has read, exits 0 \
            within 15 s (exit 75 if a request is still unanswered then; Apple sends it again); a request whose body \
            is still arriving is not waited for. Logs are JSON \
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

    @Option(help: ArgumentHelp(DeliveryHeaderOption.help, valueName: "'Name: value'"))
    var forwardHeader: [String] = []

    @Option(help: ArgumentHelp("Seconds your handler has to answer a forwarded notification before the attempt counts as failed.", valueName: "seconds"))
    var forwardTimeout = 10

    @Option(help: ArgumentHelp("Forwarding POSTs under way at once, at most.", valueName: "n"))
    var forwardConcurrency = 4

    @Option(help: ArgumentHelp(
        "Attempts after which a notification your handler keeps refusing is parked as failed (deliver --list shows it, deliver --retry-failed sends it again).",
        valueName: "n"))
    var forwardMaxAttempts = 12

    func forwardTarget(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DeliveryTarget? {
        guard let text = forwardTo ?? environment["APPSTORE_FORWARD_TO"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            guard forwardHeader.isEmpty else { throw ValidationError("--forward-header needs --forward-to") }
            return nil
        }
        let headers = try DeliveryHeaderOption.parse(forwardHeader, option: "--forward-header", environment: environment)
        do { return try DeliveryTarget(text, headers: headers) } catch let error as DeliveryTargetError { throw ValidationError("--forward-to \(error.description)") }
    }

    var forwardPolicy: DeliveryPolicy {
        DeliveryPolicy(rounds: 1, requestTimeout: .seconds(forwardTimeout), maximumAttempts: forwardMaxAttempts, concurrency: forwardConcurrency)
    }

    @Option(help: ArgumentHelp("Open connections at most; past it, new ones wait in the kernel's backlog until one closes.", valueName: "n"))
    var maxConnections = 4_096

    @Option(help: ArgumentHelp("Notification POSTs being verified and recorded at once, at most; one more is answered 503 (Retry-After: 5).", valueName: "n"))
    var maxRequests = 512

    @Option(help: ArgumentHelp("Megabytes the bodies still arriving may hold together; past it, the request whose bytes do not fit is answered 503.", valueName: "MB"))
    var maxReadingMegabytes = 64

    @Option(help: ArgumentHelp("Seconds a connection may stay idle (no byte read, no request being answered) before it is closed.", valueName: "seconds"))
    var idleTimeout = 30

    @Option(help: ArgumentHelp("Seconds a client has to send a request's whole body; after that the answer is 408 and the connection is closed.", valueName: "seconds"))
    var bodyTimeout = 10

    @Flag(help: "Check certificates at the current time, with OCSP revocation checks (a responder out of reach: 503, Apple retries).")
    var onlineChecks = false

    @Option(help: "Log lines as 'text' or 'json'. Default: text on a terminal, json otherwise (APPSTORE_LOG_FORMAT).")
    var logFormat: LogFormat?

    @OptionGroup var options: ConfigurationOptions

    func validate() throws {
        _ = try Self.address(listen)
        _ = try forwardTarget()
        guard maxConnections >= 1, maxRequests >= 1, maxReadingMegabytes >= 1 else {
            throw ValidationError("--max-connections, --max-requests and --max-reading-megabytes must be at least 1")
        }
        guard idleTimeout >= 1, bodyTimeout >= 1 else { throw ValidationError("--idle-timeout and --body-timeout must be at least 1 second") }
        guard forwardTimeout >= 1, forwardConcurrency >= 1, forwardMaxAttempts >= 1 else {
            throw ValidationError("--forward-timeout, --forward-concurrency and --forward-max-attempts must be at least 1")
        }
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
            let forwarder = target.map { NotificationForwarder(store: store, target: $0, policy: forwardPolicy, logger: logger) }
            let ingest = NotificationIngest(verifier: verifier, store: store, deliverTo: target?.key)
            let batched = BatchedIngest(ingest: ingest, limits: limits)
            let receiver = NotificationReceiver(ingest: ingest, batched: batched)
            let metrics = ServeMetrics()
            let path = self.path
            let inFlight = RequestsInFlight(maximum: maxRequests, readingBytes: maxReadingMegabytes * 1024 * 1024)
            let bodyTimeout = Duration.seconds(self.bodyTimeout)
            let responder = CallbackResponder<ServeRequestContext> { request, context in
                await Self.respond(
                    to: request, channel: context.channel, path: path, receiver: receiver, forwarder: forwarder, metrics: metrics, database: database, logger: logger,
                    inFlight: inFlight, bodyTimeout: bodyTimeout)
            }
            var quiet = logger
            if quiet.logLevel > .warning { quiet.logLevel = .warning }
            let application = Application(
                responder: responder,
                // An idle connection (a client that sent nothing for so long, or half a request's
                // head) is closed; past the limit, new connections wait until one closes.
                server: .http1(configuration: HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(idleTimeout)))),
                configuration: ApplicationConfiguration(
                    address: .hostname(host, port: port), serverName: "appstore-reconcile",
                    availableConnectionsDelegate: MaximumAvailableConnections(maxConnections)),
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
        to request: Request, channel: any Channel, path: String, receiver: NotificationReceiver, forwarder: NotificationForwarder?, metrics: ServeMetrics,
        database: PostgresClient, logger: Logger, inFlight: RequestsInFlight, bodyTimeout: Duration
    ) async -> Response {
        switch (request.uri.path, request.method) {
        case (path, .post):
            let started = ContinuousClock.now
            let admission = inFlight.admit()
            defer { admission.leave() }
            // A body refused before it all arrived is not read to its end: the connection's input
            // is closed, so it ends after the answer instead of draining a client's slow drip.
            let stopReading: @Sendable () -> Void = { channel.close(mode: .input, promise: nil) }
            if let length = request.headers[.contentLength].flatMap(Int.init), length > NotificationReceiver.maximumBodyBytes {
                stopReading()
                return respond(await receiver.answer(body: nil), started: started, metrics: metrics, forwarder: forwarder, logger: logger)
            }
            let body: [UInt8]?
            switch await Self.body(of: request, within: bodyTimeout, admission: admission, on: channel.eventLoop, stopReading: stopReading) {
            case .read(let bytes): body = bytes
            case .tooLarge:
                stopReading()
                body = nil
            case .overloaded:
                stopReading()
                return respond(.overloaded, started: started, metrics: metrics, forwarder: forwarder, logger: logger)
            case .cut:
                // Nobody is left to answer: counted, not logged (an idle timeout, a client gone).
                metrics.record(other: "body_cut")
                return text(400, "bad request: the connection ended before the body did\n")
            case .tooSlow:
                metrics.record(other: "body_timeout")
                logger.notice("answered 408: the body did not arrive within \(bodyTimeout)")
                return text(408, "request timeout: the body did not arrive within \(bodyTimeout)\n")
            }
            // From here the request counts as answering (a graceful stop waits for it), if there is room.
            guard admission.answering() else {
                return respond(.overloaded, started: started, metrics: metrics, forwarder: forwarder, logger: logger)
            }
            return respond(await receiver.answer(body: body), started: started, metrics: metrics, forwarder: forwarder, logger: logger)
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
            var forwards: DeliveryCounts?
            if let target = forwarder?.redelivery.target {
                let store = receiver.ingest.store
                forwards = try? await NotificationReceiver.within(.seconds(3), { try await store.deliveryCounts(to: target.key) }) ?? nil
            }
            var response = text(200, metrics.text(forwards: forwards))
            response.headers[.contentType] = "text/plain; version=0.0.4"
            return response
        default:
            metrics.record(other: "not_found")
            return text(404, "not found\n")
        }
    }

    static func respond(
        _ answer: NotificationReceiver.Answer, started: ContinuousClock.Instant, metrics: ServeMetrics, forwarder: NotificationForwarder?, logger: Logger
    ) -> Response {
        let elapsed = ContinuousClock.now - started
        metrics.record(answer, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        if answer.status != 200 { logger.notice("answered \(answer.status): \(answer.outcome)") }
        if answer == .recorded { forwarder?.wake() }
        var response = text(answer.status, answer.text)
        if let seconds = answer.retryAfter { response.headers[.retryAfter] = String(seconds) }
        return response
    }

    enum BodyRead: Sendable {
        case read([UInt8])
        case tooLarge
        case tooSlow
        /// The bodies being read hold all the bytes they may.
        case overloaded
        /// The connection ended before the body did (the client left, or the idle timeout).
        case cut
    }

    /// The request's body, read within `limit` and counted against the bytes all bodies being
    /// read may hold (`admission`): a client that sends a byte now and then keeps a connection
    /// from being idle, not its request from ending. When the time is up, `stopReading` ends the
    /// connection's input, which ends the read, and the connection closes after the answer
    /// rather than waits for more. The time limit is a timer on the connection's event loop, not
    /// a task racing the reader: two tasks and a sleep per request cost serve CPU under load.
    static func body(
        of request: Request, within limit: Duration, admission: RequestsInFlight.Admission, on eventLoop: any EventLoop,
        stopReading: @escaping @Sendable () -> Void
    ) async -> BodyRead {
        final class Expiry: Sendable { let passed = Atomic(false) }
        let expiry = Expiry()
        let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
        let timer = eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            expiry.passed.store(true, ordering: .sequentiallyConsistent)
            stopReading()
        }
        defer { timer.cancel() }
        var collected = ByteBuffer()
        do {
            for try await part in request.body {
                guard collected.readableBytes + part.readableBytes <= NotificationReceiver.maximumBodyBytes else { return .tooLarge }
                guard admission.received(part.readableBytes) else { return .overloaded }
                var part = part
                collected.writeBuffer(&part)
            }
        } catch {
            return expiry.passed.load(ordering: .sequentiallyConsistent) ? .tooSlow : .cut
        }
        // Input ended by the timer reads as the body's end: what arrived is not the whole body.
        return expiry.passed.load(ordering: .sequentiallyConsistent) ? .tooSlow : .read(Array(collected.readableBytesView))
    }

    /// Hummingbird's basic context, and the connection: `serve` ends a slow body's input.
    struct ServeRequestContext: RequestContext {
        var coreContext: CoreRequestContextStorage
        let channel: any Channel

        init(source: ApplicationRequestContextSource) {
            coreContext = CoreRequestContextStorage(source: source)
            channel = source.channel
        }
    }

    static func text(_ status: Int, _ body: String) -> Response {
        Response(
            status: HTTPResponse.Status(code: status), headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }
}
