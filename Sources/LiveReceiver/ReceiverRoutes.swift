import Decisions
package import Foundation
import HTTPTypes
package import Hummingbird
package import Ledger
package import Logging
import NIOCore
package import PostgresNIO
import Reconciliation
package import SignedData
import Synchronization

/// What `serve` answers, by path and method: Apple's notification POSTs at `path` (read within
/// `bodyTimeout` and the bounds of `inFlight`, then verified and recorded by `receiver`),
/// `/livez`, `/healthz` and `/metrics`; 404 and 405 for anything else. Each answer is counted
/// in `metrics`, a notification's under its App Store; a notification recorded wakes its App
/// Store's forwarder.
package struct ReceiverRoutes: Sendable {
    package let path: String
    package let receiver: NotificationReceiver
    /// Each App Store's forwarder, if it forwards (App Stores with one target share one).
    package let forwarders: [AppStorePair: NotificationForwarder]
    package let metrics: ServeMetrics
    /// For `/healthz`: the migrations applied.
    package let database: PostgresClient
    package let logger: Logger
    package let inFlight: RequestsInFlight
    package let bodyTimeout: Duration
    /// The ledger's figures on /metrics, read at most once per its interval.
    package let ledgerGauges: LedgerGaugeCache
    /// `/healthz`'s count of the migrations applied, read at most once a second.
    package let health: LedgerReadCache<Int>
    /// `/metrics`' count of the notifications not yet accepted by the `--forward-to` handlers,
    /// read at most once per its interval.
    package let forwardCounts: LedgerReadCache<DeliveryCounts>
    /// Whether a request whose connection is already closed is skipped unanswered: on a
    /// listener's sockets (`ReceiverApplication`); not in process, where the channel of a test's
    /// request is never active.
    package var skipsClosedConnections = false
    /// The present, for the ledger's figures on /metrics (a test's own clock in tests).
    package var now: @Sendable () -> Date = { Date() }
    /// How long past its due time a notification Apple owes counts as overdue (the configuration's `overdueAfter`).
    package var overdueAfter: TimeInterval = GapRules.defaultOverdueAfter
    /// The "answered 400/503" log lines, at most one per kind of answer per 10 s.
    let logThrottle = Locked(LogThrottle(interval: .seconds(10)))

    package init(
        path: String, receiver: NotificationReceiver, forwarders: [AppStorePair: NotificationForwarder] = [:], metrics: ServeMetrics, database: PostgresClient,
        logger: Logger,
        inFlight: RequestsInFlight, bodyTimeout: Duration, ledgerGauges: LedgerGaugeCache = LedgerGaugeCache(),
        health: LedgerReadCache<Int> = LedgerReadCache(interval: .seconds(1)),
        forwardCounts: LedgerReadCache<DeliveryCounts> = LedgerReadCache(interval: .seconds(10))
    ) {
        self.ledgerGauges = ledgerGauges
        self.health = health
        self.forwardCounts = forwardCounts
        self.path = path
        self.receiver = receiver
        self.forwarders = forwarders
        self.metrics = metrics
        self.database = database
        self.logger = logger
        self.inFlight = inFlight
        self.bodyTimeout = bodyTimeout
    }

    /// serve's routes in Hummingbird's router: the notification POST at `path`, `/livez`,
    /// `/healthz` and `/metrics`, behind the gate every request passes (`RequestGate`: a closed
    /// connection, a body where none is accepted, another method at `path`, and 404 for the rest).
    package func router() -> Router<ReceiverRequestContext> {
        let router = Router(context: ReceiverRequestContext.self)
        router.add(middleware: RequestGate(routes: self))
        router.post(RouterPath(path)) { request, context in await notification(request, channel: context.channel) }
        router.get("/livez") { _, _ in livez() }
        router.get("/healthz") { _, _ in await healthz() }
        router.get("/metrics") { _, _ in await metricsPage() }
        return router
    }

    /// The process answers: no database call, so a database outage never restarts the pod.
    func livez() -> Response {
        metrics.record(other: .health)
        return Self.text(200, "ok\n")
    }

    /// Whether the ledger is reachable and migrated. Anyone can ask: the database is read at most
    /// once a second, whoever asks.
    func healthz() async -> Response {
        metrics.record(other: .health)
        let database = self.database
        let logger = self.logger
        let applied = await Self.read(through: health) { try await Migrator().applied(database, logger: logger).count }
        guard let applied else { return Self.text(503, "the database is unavailable\n") }
        let expected = Migration.bundled.count
        return applied >= expected ? Self.text(200, "ok\n") : Self.text(503, "the ledger needs migrations: \(applied) of \(expected) applied\n")
    }

    /// The metrics in Prometheus' text format, with the ledger's figures when it answers in time.
    func metricsPage() async -> Response {
        metrics.record(other: .metrics)
        // Every target's, added up; left out when the ledger does not answer for one of them.
        // Read at most once per interval, however many scrape (anyone reaching the port can).
        var forwards: DeliveryCounts?
        let keys = Set(forwarders.values.map(\.redelivery.target.key)).sorted()
        let store = receiver.ingest.store
        if !keys.isEmpty {
            forwards = await Self.read(through: forwardCounts) {
                var total = DeliveryCounts(pending: 0, failed: 0)
                for key in keys {
                    let counts = try await store.deliveryCounts(to: key)
                    total.pending += counts.pending
                    total.failed += counts.failed
                }
                return total
            }
        }
        // The ledger's figures for the alerts (last successes, refund requests to answer);
        // left out when the ledger does not answer in time.
        let pairs = metrics.pairs
        let ledger = pairs.isEmpty ? nil : await Self.read(through: ledgerGauges) { try await store.gauges(for: pairs, now: now(), overdueAfter: overdueAfter) }
        var response = Self.text(200, metrics.text(forwards: forwards, ledger: ledger))
        response.headers[.contentType] = "text/plain; version=0.0.4"
        return response
    }

    /// A public GET's read of the ledger: through `cache` (at most one per its interval), within
    /// 3 s; nil when the ledger did not answer in time or failed.
    static func read<Value: Sendable>(through cache: LedgerReadCache<Value>, _ read: @escaping @Sendable () async throws -> Value) async -> Value? {
        await cache.value { (try? await NotificationReceiver.within(.seconds(3), read)) ?? nil }
    }

    /// Whether the request says a body follows: a Content-Length other than 0, or any
    /// Transfer-Encoding (HTTP/1.1 frames a body by one or the other).
    static func carriesBody(_ request: Request) -> Bool {
        if request.headers[.transferEncoding] != nil { return true }
        guard let length = request.headers[.contentLength] else { return false }
        return length.trimmingCharacters(in: .whitespaces) != "0"
    }

    /// `response`, saying the connection ends with it: its request's input was closed unread, so
    /// a client must not send another request on it (one that did saw "I/O on closed channel").
    static func closing(_ response: Response) -> Response {
        var response = response
        response.headers[.connection] = "close"
        return response
    }

    static func text(_ status: Int, _ body: String) -> Response {
        Response(
            status: HTTPResponse.Status(code: status), headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body))
        )
    }
}
