/// What one connection may make `serve` hold, whatever its client does (issue 53): requests read
/// whose answers are not yet written, the time a request may take to arrive whole, and the time
/// an answer may wait because the client does not read. Past any of them the connection is
/// closed. Apple sends one notification per connection and reads each answer; only a client out
/// to make serve hold memory reaches these.
package struct ConnectionBounds: Hashable, Sendable {
    /// Requests read on one connection and not yet answered (HTTP/1.1 pipelining), at most. Each
    /// one read is decoded and waits in memory for the ones before it to be answered.
    package var maximumPipelinedRequests = 16
    /// From a request's head to its end (its whole body), at most: a body that arrives a byte
    /// now and then restarts the idle timer at each byte, not this one. Longer than the
    /// notification POST's `--body-timeout` (which answers 408 first).
    package var requestTimeout: Duration = .seconds(30)
    /// How long an answer may wait unwritten because the client reads nothing (the connection not
    /// writable): the idle timer does not run while an answer is being written.
    package var writeTimeout: Duration = .seconds(10)

    package init() {}
}

/// Why a connection was closed by its bounds: the `reason` label of
/// `appstore_reconcile_serve_connections_closed_total`.
package enum ConnectionClosure: String, CaseIterable, Sendable {
    case pipelined
    case requestTimeout = "request_timeout"
    case writeTimeout = "write_timeout"
}

/// A request `serve` refuses from its head alone (issue 67): one that asks to leave HTTP/1.1 on its
/// connection. After such a head the HTTP/1 decoder stops parsing and keeps every byte that
/// follows, waiting for an upgrade handler that `serve` does not have: 400 MB streamed after a
/// `GET /livez` with `Upgrade: websocket` raised serve's memory by 410 MB, and the idle timeout
/// alone ended it. So such a request is answered by the connection itself, its input closed at
/// once and the connection after the answer; nothing it sends next is read. Apple's POST never
/// carries either.
package enum ProtocolSwitch: String, CaseIterable, Hashable, Sendable {
    /// Any request with an `Upgrade` header field (WebSocket, h2c, …), on any route: 400.
    case upgrade
    /// A `CONNECT` request (a tunnel): 405, `serve` being no proxy.
    case connect

    /// The switch a request's head asks for, if any: its method, and whether it carries an
    /// `Upgrade` field (the decoder treats `Connection: upgrade` with `Upgrade` as one; `serve`
    /// refuses the field alone too, since it never upgrades).
    package init?(method: String, hasUpgradeField: Bool) {
        if method == "CONNECT" {
            self = .connect
        } else if hasUpgradeField {
            self = .upgrade
        } else {
            return nil
        }
    }

    /// The answer's status code.
    package var status: Int { self == .connect ? 405 : 400 }

    /// The answer's text, for a person trying it.
    package var explanation: String {
        switch self {
        case .upgrade: "bad request: this server does not upgrade connections (no WebSocket, no h2c)\n"
        case .connect: "method not allowed: this server is not a proxy\n"
        }
    }
}

/// The decisions of `ConnectionGuard`, without I/O: fed the requests read, the answers written
/// and the connection's writability, it says when to start or stop a timer and when to close.
package struct ConnectionGuardState: Hashable, Sendable {
    package enum Action: Hashable, Sendable {
        case none
        case close(ConnectionClosure)
        /// Stop reading now, answer with the switch's refusal, then close the connection.
        case refuse(ProtocolSwitch)
        /// A switch pipelined behind requests not yet answered: stop reading now, and write no
        /// refusal (it would read as the answer to an earlier request); those requests are
        /// answered, and the connection ends after them (its input is closed).
        case stopReading(ProtocolSwitch)
        case startRequestTimer
        case cancelRequestTimer
        case startWriteTimer
        case cancelWriteTimer
    }

    package let bounds: ConnectionBounds
    /// Requests whose head was read and whose answer's end is not yet written.
    package private(set) var outstanding = 0
    /// Whether a request's head was read and its end not yet.
    package private(set) var readingRequest = false
    package private(set) var closed = false
    /// A protocol switch was read behind requests still unanswered: nothing more is read, their
    /// answers are still written (and bounded by the write timer).
    package private(set) var draining = false

    package init(bounds: ConnectionBounds) {
        self.bounds = bounds
    }

    /// A request's head was read; `switching` is what it asks to leave HTTP for, if anything.
    package mutating func requestHead(switching: ProtocolSwitch? = nil) -> Action {
        guard !closed else { return .none }
        if let switching {
            closed = true
            guard outstanding == 0 else {
                draining = true
                return .stopReading(switching)
            }
            return .refuse(switching)
        }
        outstanding += 1
        if outstanding > bounds.maximumPipelinedRequests { return close(.pipelined) }
        readingRequest = true
        return .startRequestTimer
    }

    package mutating func requestEnd() -> Action {
        guard !closed, readingRequest else { return .none }
        readingRequest = false
        return .cancelRequestTimer
    }

    /// An answer's end was written (the action is performed after it).
    package mutating func answerEnd() -> Action {
        outstanding = max(0, outstanding - 1)
        return .none
    }

    package mutating func writabilityChanged(isWritable: Bool) -> Action {
        // While a refusal waits for earlier answers, a client that reads none of them is still bounded.
        guard !closed || draining else { return .none }
        return isWritable ? .cancelWriteTimer : .startWriteTimer
    }

    package mutating func timerFired(_ closure: ConnectionClosure) -> Action {
        guard !closed || draining else { return .none }
        draining = false
        return close(closure)
    }

    private mutating func close(_ closure: ConnectionClosure) -> Action {
        closed = true
        return .close(closure)
    }
}
