package import Decisions
package import Hummingbird
import HummingbirdCore
package import Ledger
package import Logging
import Reconciliation
import ServiceLifecycle
package import SignedData
import UnixSignals

/// What `serve` is given: where it listens, and the bounds on what a client can make it hold.
package struct ReceiverSettings: Sendable {
    package var host = "127.0.0.1"
    package var port = 8080
    /// The path Apple POSTs to.
    package var path = "/apple/notifications"
    /// Open connections at most; past it, new ones wait in the kernel's backlog.
    package var maximumConnections = 4_096
    /// Connections the kernel holds before serve accepts them (capped by the kernel's
    /// `net.core.somaxconn`). A burst of connections past it is dropped by the kernel before serve
    /// sees it (Linux counts them as ListenOverflows): a client then gets no answer. With
    /// Hummingbird's default, 256, ServeLimitsTests' flood (a thousand connections at once) left
    /// 16 of 10,000 requests unanswered under the whole suite, the connection closed without serve
    /// seeing the request, and the machine counted 164 listen-queue overflows that day; alone, the
    /// same test overflows none either way.
    package var backlog = 4_096
    /// Notification POSTs being verified and recorded at once, at most.
    package var maximumRequests = 512
    /// Bytes the bodies still arriving may hold together.
    package var maximumReadingBytes = 64 * 1024 * 1024
    /// A connection that sends nothing for so long (or half a request's head) is closed.
    package var idleTimeout: Duration = .seconds(30)
    /// The time a client has to send a request's whole body.
    package var bodyTimeout: Duration = .seconds(10)
    /// What one connection may make serve hold: pipelined requests, a request's time to arrive,
    /// an answer's time to be read.
    package var connectionBounds = ConnectionBounds()
    /// Payloads that fail verification written to `app_store.rejected_payloads` per reason and
    /// hour, at most; the others are answered 400 and counted on /metrics only.
    package var keptRejectionsPerHour = 10
    /// Where each App Store's recorded notifications are forwarded (none: not forwarded), and how.
    package var forwardTo: [AppStorePair: DeliveryTarget] = [:]
    package var forwardPolicy = DeliveryPolicy(rounds: 1)
    /// The configuration's `overdueAfter`, for `/metrics`' count of overdue subscriptions.
    package var overdueAfter: Double = GapRules.defaultOverdueAfter

    package init() {}
}

/// `serve`'s Hummingbird application: its routes on one listener, with the parts it needs as
/// the application's services (the database client, the batch writers, the forwarder). Hummingbird
/// runs them in its service group, started before the listener and stopped after it, last to
/// first: the listener stops accepting, the requests it holds are answered, the forwarder stops,
/// the batch writers write what is queued, then the database client closes.
package struct ReceiverApplication: Sendable {
    package let application: Application<RouterResponder<ReceiverRequestContext>>
    package let routes: ReceiverRoutes

    /// The receiver of `settings` for every App Store of `verifiers` (one each, at least one),
    /// recording in the ledger at `databaseURL`; `onListening` is told the port once the listener
    /// is bound. One listener, one queue to the database within one set of bounds, one forwarder
    /// per target, whatever the number of App Stores.
    package init(
        _ settings: ReceiverSettings, verifiers: [SignedDataVerifier], databaseURL: DatabaseURL, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        let limits = BatchedIngest.Limits()
        // A batch's statements end by the server's clock before a request's answer is due.
        let database = LedgerDatabase.client(databaseURL, logger: logger, statementTimeout: limits.write)
        let store = LedgerStore(client: database, logger: logger)
        var byTarget: [String: NotificationForwarder] = [:]
        var forwarders: [AppStorePair: NotificationForwarder] = [:]
        for (pair, target) in settings.forwardTo.sorted(by: { $0.key < $1.key }) {
            let forwarder = byTarget[target.key] ?? NotificationForwarder(store: store, target: target, policy: settings.forwardPolicy, logger: logger)
            byTarget[target.key] = forwarder
            forwarders[pair] = forwarder
        }
        let ingests = verifiers.map { NotificationIngest(verifier: $0, store: store, deliverTo: settings.forwardTo[$0.configuration.pair]?.key) }
        let batched = BatchedIngest(ingests: ingests, limits: limits)
        var routes = ReceiverRoutes(
            path: settings.path, receiver: NotificationReceiver(ingests: ingests, batched: batched, keptRejectionsPerHour: settings.keptRejectionsPerHour), forwarders: forwarders,
            metrics: ServeMetrics(pairs: ingests.map(\.verifier.configuration.pair)),
            database: database, logger: logger, inFlight: RequestsInFlight(maximum: settings.maximumRequests, readingBytes: settings.maximumReadingBytes),
            bodyTimeout: settings.bodyTimeout
        )
        routes.skipsClosedConnections = true
        routes.overdueAfter = settings.overdueAfter
        self.init(routes, batched: batched, settings: settings, logger: logger, onListening: onListening)
    }

    /// The application of `routes`, whose receiver's batch writers are `batched`.
    package init(
        _ routes: ReceiverRoutes, batched: BatchedIngest, settings: ReceiverSettings, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        var quiet = logger
        if quiet.logLevel > .warning { quiet.logLevel = .warning }
        let port = settings.port
        let bounds = settings.connectionBounds
        let metrics = routes.metrics
        self.routes = routes
        self.application = Application(
            router: routes.router(),
            server: .http1(
                configuration: HTTP1Channel.Configuration(
                    additionalChannelHandlers: [
                        ConnectionGuard(bounds: bounds, onClose: { metrics.record(closed: $0) }, onRefuse: { metrics.record(refused: $0) })
                    ],
                    idleTimeout: .seconds(max(1, settings.idleTimeout.components.seconds))
                )
            ),
            configuration: ApplicationConfiguration(
                address: .hostname(settings.host, port: port), serverName: "appstore-reconcile", backlog: settings.backlog,
                availableConnectionsDelegate: MaximumAvailableConnections(settings.maximumConnections)
            ),
            services: [routes.database, batched] + Self.distinct(routes.forwarders.sorted { $0.key < $1.key }.map(\.value)),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
            logger: quiet
        )
    }

    /// Each forwarder once, in the order given.
    private static func distinct(_ forwarders: [NotificationForwarder]) -> [any Service] {
        var seen: Set<ObjectIdentifier> = []
        return forwarders.filter { seen.insert(ObjectIdentifier($0)).inserted }
    }

    /// Runs until SIGTERM or SIGINT, then stops gracefully.
    package func run() async throws {
        try await application.runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }
}
