import Decisions
import Foundation
import HTTPTypes
package import Hummingbird
import Logging
import NIOCore
import Synchronization

extension ReceiverRoutes {
    /// The answer to Apple's notification POST on `channel` (whose input a refused body's read
    /// closes): its body read within `bodyTimeout` and the bounds of `inFlight`, then verified
    /// and recorded by `receiver`.
    func notification(_ request: Request, channel: any Channel) async -> Response {
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
}
