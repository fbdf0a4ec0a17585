import Decisions
import Foundation
import HTTPTypes
import Hummingbird
import Ledger
import Logging
import NIOCore
import PostgresNIO
import Reconciliation
import SignedData
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

    /// The answer to one request on `channel` (whose input a refused body's read closes).
    package func respond(to request: Request, channel: any Channel) async -> Response {
        // Its connection already closed (by its bounds: a client pipelining requests it never
        // reads): nobody can read an answer, so none is worked out.
        if skipsClosedConnections, !channel.isActive { return Self.closing(Self.text(503, "the connection is closed\n")) }
        // Only Apple's POST has a body. Any other request that comes with one is answered at once
        // and its connection's input closed unread (issue 53: a GET /livez declaring a gigabyte
        // and dripping a byte now and then held its connection for ever, each part restarting the
        // idle timer, and one streamed at full speed cost a core).
        if !(request.uri.path == path && request.method == .post), Self.carriesBody(request) {
            channel.close(mode: .input, promise: nil)
            metrics.record(other: .bodyRefused)
            return Self.closing(Self.text(413, "content too large: no request body is accepted here\n"))
        }
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
                return Self.closing(respond(await receiver.routedAnswer(body: nil), started: started))
            }
            let body: [UInt8]?
            switch await Self.body(of: request, within: bodyTimeout, admission: admission, on: channel.eventLoop, stopReading: stopReading) {
            case .read(let bytes): body = bytes
            case .tooLarge:
                stopReading()
                return Self.closing(respond(await receiver.routedAnswer(body: nil), started: started))
            case .overloaded:
                stopReading()
                return Self.closing(respond(.init(answer: .overloaded), started: started))
            case .cut:
                // Nobody is left to answer: counted, not logged (an idle timeout, a client gone).
                metrics.record(other: .bodyCut)
                return Self.text(400, "bad request: the connection ended before the body did\n")
            case .tooSlow:
                metrics.record(other: .bodyTimeout)
                logger.notice("answered 408: the body did not arrive within \(bodyTimeout)")
                return Self.closing(Self.text(408, "request timeout: the body did not arrive within \(bodyTimeout)\n"))
            }
            // From here the request counts as answering (a graceful stop waits for it), if there is room.
            guard admission.answering() else {
                return respond(.init(answer: .overloaded), started: started)
            }
            return respond(await receiver.routedAnswer(body: body), started: started)
        case (path, _):
            metrics.record(other: .methodNotAllowed)
            var response = Self.text(405, "method not allowed: POST only\n")
            response.headers[.allow] = "POST"
            return response
        case ("/livez", .get):
            // The process answers: no database call, so a database outage never restarts the pod.
            metrics.record(other: .health)
            return Self.text(200, "ok\n")
        case ("/healthz", .get):
            metrics.record(other: .health)
            // Anyone can ask: the database is read at most once a second, whoever asks.
            let database = self.database
            let logger = self.logger
            let applied = await Self.read(through: health) { try await Migrator().applied(database, logger: logger).count }
            guard let applied else { return Self.text(503, "the database is unavailable\n") }
            let expected = Migration.bundled.count
            return applied >= expected
                ? Self.text(200, "ok\n") : Self.text(503, "the ledger needs migrations: \(applied) of \(expected) applied\n")
        case ("/metrics", .get):
            metrics.record(other: .metrics)
            // Every target's, added up; left out when the ledger does not answer for one of them.
            // Read at most once per interval, however many scrape (anyone reaching the port can).
            var forwards: DeliveryCounts?
            let keys = Set(forwarders.values.map(\.redelivery.target.key)).sorted()
            if !keys.isEmpty {
                let store = receiver.ingest.store
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
            let store = receiver.ingest.store
            let ledger = pairs.isEmpty ? nil : await Self.read(through: ledgerGauges) { try await store.gauges(for: pairs, now: Date()) }
            var response = Self.text(200, metrics.text(forwards: forwards, ledger: ledger))
            response.headers[.contentType] = "text/plain; version=0.0.4"
            return response
        default:
            metrics.record(other: .notFound)
            return Self.text(404, "not found\n")
        }
    }

    /// A public GET's read of the ledger: through `cache` (at most one per its interval), within
    /// 3 s; nil when the ledger did not answer in time or failed.
    static func read<Value: Sendable>(through cache: LedgerReadCache<Value>, _ read: @escaping @Sendable () async throws -> Value) async -> Value? {
        await cache.value { (try? await NotificationReceiver.within(.seconds(3), read)) ?? nil }
    }

    func respond(_ routed: NotificationReceiver.Routed, started: ContinuousClock.Instant) -> Response {
        let answer = routed.answer
        let elapsed = ContinuousClock.now - started
        metrics.record(
            answer, of: routed.pair, notKept: routed.notKept, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        // Anyone can make serve answer 400 or 503 as often as they like: one line per kind of
        // answer per interval at most, saying how many it stands for.
        if answer.status != 200, let others = logThrottle.withLock { $0.note(answer.outcome, at: .now) } {
            let since = others > 0 ? " (and \(others) more since the last line)" : ""
            logger.notice("answered \(answer.status): \(answer.outcome)\(routed.pair.map { " (\($0))" } ?? "")\(since)")
        }
        if answer == .recorded, let pair = routed.pair { forwarders[pair]?.wake() }
        var response = Self.text(answer.status, answer.text)
        if let seconds = answer.retryAfter { response.headers[.retryAfter] = String(seconds) }
        return response
    }

    package enum BodyRead: Sendable {
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
    package static func body(
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
