import AppStoreServerAPI
import ArgumentParser
import Decisions
import Deployment
import Foundation
import Ledger
import LiveReceiver
import Logging
import Reconciliation
import SignedData

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive Apple's live notifications: verify each and record it in the ledger, as ingest does.",
        discussion: """
            Point App Store Connect's notification URLs (Version 2), Production and Sandbox of every app, at --path \
            (through your TLS proxy): one serve receives every app and environment the configuration lists. Each POST {"signedPayload": "…"} goes through the same verify-and-record \
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

    @Option(help: ArgumentHelp("Where to listen (default: 127.0.0.1:8080).", valueName: "host:port"), transform: ListenAddress.argument)
    var listen = ListenAddress(host: "127.0.0.1", port: 8080)

    @Option(help: "The path Apple POSTs to.")
    var path = "/apple/notifications"

    @Option(help: ArgumentHelp(
        "After recording, hand each notification to your own webhook handler at this URL (https, or http to loopback; APPSTORE_FORWARD_TO), through the ledger's delivery table: a failing handler never fails Apple's delivery, and nothing is lost.",
        valueName: "url"))
    var forwardTo: DeliveryURLArgument?

    @Option(help: ArgumentHelp(DeliveryHeaderArgument.help, valueName: "'Name: value'"))
    var forwardHeader: [DeliveryHeaderArgument] = []

    @Option(help: ArgumentHelp("Seconds your handler has to answer a forwarded notification before the attempt counts as failed.", valueName: "seconds"))
    var forwardTimeout = 10

    @Option(help: ArgumentHelp("Forwarding POSTs under way at once, at most.", valueName: "n"))
    var forwardConcurrency = 4

    @Option(help: ArgumentHelp("Attempts after which a notification your handler keeps refusing is parked as failed (deliver --list shows it, deliver --retry-failed sends it again).", valueName: "n"))
    var forwardMaxAttempts = 12

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

    @Option(help: ArgumentHelp("Requests read on one connection and not yet answered (HTTP/1.1 pipelining), at most; one more closes the connection.", valueName: "n"))
    var maxPipelinedRequests = ConnectionBounds().maximumPipelinedRequests

    @Option(help: ArgumentHelp("Seconds from a request's first line to its end (its whole body), on any route; past it the connection is closed. At least --body-timeout + 5.", valueName: "seconds"))
    var requestTimeout = Int(ConnectionBounds().requestTimeout.components.seconds)

    @Option(help: ArgumentHelp("Seconds an answer may wait unwritten because the client reads nothing; past it the connection is closed.", valueName: "seconds"))
    var writeTimeout = Int(ConnectionBounds().writeTimeout.components.seconds)

    @Option(help: ArgumentHelp("Payloads that fail verification kept in app_store.rejected_payloads per reason and hour, at most; the others are answered 400 and counted on /metrics only.", valueName: "n"))
    var rejectionsKeptPerHour = 10

    @Flag(help: "Check certificates at the current time, with OCSP revocation checks (a responder out of reach: 503, Apple retries).")
    var onlineChecks = false

    @Option(help: "Log lines as 'text' or 'json'. Default: text on a terminal, json otherwise (APPSTORE_LOG_FORMAT).")
    var logFormat: LogFormat?

    @OptionGroup var options: ConfigurationOptions

    mutating func validate() throws {
        // Headers without --forward-to go with the configuration file's deliverTo (checked in appStores).
        let forwardToGiven = forwardTo != nil || !(ProcessInfo.processInfo.environment["APPSTORE_FORWARD_TO"] ?? "").isEmpty
        try DeliveryOption.resolve(&forwardTo, headers: forwardToGiven ? forwardHeader : [], urlOption: "--forward-to", headerOption: "--forward-header", variable: "APPSTORE_FORWARD_TO")
        for case .failure(let error) in forwardHeader.map(\.parsed) { throw ValidationError("--forward-header \(error.description)") }
        guard maxConnections >= 1, maxRequests >= 1, maxReadingMegabytes >= 1 else {
            throw ValidationError("--max-connections, --max-requests and --max-reading-megabytes must be at least 1")
        }
        guard idleTimeout >= 1, bodyTimeout >= 1 else { throw ValidationError("--idle-timeout and --body-timeout must be at least 1 second") }
        guard maxPipelinedRequests >= 1, requestTimeout >= 1, writeTimeout >= 1 else {
            throw ValidationError("--max-pipelined-requests, --request-timeout and --write-timeout must be at least 1")
        }
        guard rejectionsKeptPerHour >= 0 else { throw ValidationError("--rejections-kept-per-hour must be 0 or more") }
        guard forwardTimeout >= 1, forwardConcurrency >= 1, forwardMaxAttempts >= 1 else {
            throw ValidationError("--forward-timeout, --forward-concurrency and --forward-max-attempts must be at least 1")
        }
        // As the router matches paths: by their segments (`/livez/` is `/livez`).
        guard path.hasPrefix("/"), !["healthz", "livez", "metrics"].map({ [Substring($0)] }).contains(path.split(separator: "/")) else {
            throw ValidationError("--path must start with / and not be /healthz, /livez or /metrics")
        }
        // The router reads ':name', '{…}' and '*' as patterns: the path is a literal one.
        guard !path.split(separator: "/").contains(where: { $0.hasPrefix(":") || $0.contains("*") || $0.contains("{") || $0.contains("}") }) else {
            throw ValidationError("--path is a literal path: no segment may start with ':' or hold '*', '{' or '}'")
        }
    }

    /// The receiver's settings, from the flags (forwarding aside: see `run`).
    var settings: ReceiverSettings {
        var settings = ReceiverSettings()
        (settings.host, settings.port, settings.path) = (listen.host, listen.port, path)
        settings.maximumConnections = maxConnections
        settings.maximumRequests = maxRequests
        settings.maximumReadingBytes = maxReadingMegabytes * 1024 * 1024
        (settings.idleTimeout, settings.bodyTimeout) = (.seconds(idleTimeout), .seconds(bodyTimeout))
        settings.connectionBounds.maximumPipelinedRequests = maxPipelinedRequests
        // The notification POST's body timeout answers 408 first; this one is the backstop.
        settings.connectionBounds.requestTimeout = .seconds(max(requestTimeout, bodyTimeout + 5))
        settings.connectionBounds.writeTimeout = .seconds(writeTimeout)
        settings.keptRejectionsPerHour = rejectionsKeptPerHour
        settings.forwardPolicy = DeliveryPolicy(rounds: 1, requestTimeout: .seconds(forwardTimeout), maximumAttempts: forwardMaxAttempts, concurrency: forwardConcurrency)
        return settings
    }

    func run() async throws {
        try await withExitStatus(logFormat: logFormat, job: true) {
            // serve calls no Apple API: the keys the file names need not be readable here.
            let pairs = try options.pairs(keysNeeded: false)
            let (settings, verifiers) = try appStores(pairs)
            let databaseURL = try pairs[0].settings.databaseURL()
            let logger = Logger(label: "appstore-reconcile.serve")
            try await LedgerDatabase.checkReachable(databaseURL, logger: logger)
            let listening = Self.listeningLine(settings, pairs: pairs.map(\.pair))
            let receiver = ReceiverApplication(settings, verifiers: verifiers, databaseURL: databaseURL, logger: logger) { port in
                printError(listening(port))
            }
            let watch = await ServeShutdown.watch(receiver.routes.inFlight, answering: receiver.routes.receiver.deadline, linger: .seconds(3))
            defer { watch.cancel() }
            try await receiver.run()
            printError("serve: stopped")
        }
    }
}
