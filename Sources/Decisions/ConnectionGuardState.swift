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

/// The decisions of `ConnectionGuard`, without I/O: fed the requests read, the answers written
/// and the connection's writability, it says when to start or stop a timer and when to close.
package struct ConnectionGuardState: Hashable, Sendable {
    package enum Action: Hashable, Sendable {
        case none
        case close(ConnectionClosure)
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

    package init(bounds: ConnectionBounds) {
        self.bounds = bounds
    }

    package mutating func requestHead() -> Action {
        guard !closed else { return .none }
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

    package mutating func answerEnd() -> Action {
        outstanding = max(0, outstanding - 1)
        return .none
    }

    package mutating func writabilityChanged(isWritable: Bool) -> Action {
        guard !closed else { return .none }
        return isWritable ? .cancelWriteTimer : .startWriteTimer
    }

    package mutating func timerFired(_ closure: ConnectionClosure) -> Action {
        guard !closed else { return .none }
        return close(closure)
    }

    private mutating func close(_ closure: ConnectionClosure) -> Action {
        closed = true
        return .close(closure)
    }
}
