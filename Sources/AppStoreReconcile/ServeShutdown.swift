import Foundation
import Synchronization
import UnixSignals

/// The requests `serve` is answering at this moment.
final class RequestsInFlight: Sendable {
    private let count = Mutex(0)

    var current: Int { count.withLock { $0 } }

    func track<Value>(_ body: () async -> Value) async -> Value {
        count.withLock { $0 += 1 }
        defer { count.withLock { $0 -= 1 } }
        return await body()
    }
}

/// The bound on `serve`'s graceful shutdown. At SIGTERM or SIGINT the service group stops
/// accepting and waits for every connection to close; a client that keeps its connection open
/// after its answer (or never sends the rest of a request) would keep `serve` running for ever,
/// past any orchestrator's grace period. This watch waits for the requests in flight to be
/// answered (each within the receiver's deadline), gives the clients `linger` to close their
/// connections, and then ends the process with exit 0: nothing is lost, since a notification is
/// answered 200 only after its commit, and one cut off unanswered is sent again by Apple.
enum ServeShutdown {
    /// Starts watching; call before the service group runs, so that no signal comes unseen.
    /// Cancelling the watch (the group ended on its own) ends it without exiting.
    static func watch(_ inFlight: RequestsInFlight, answering deadline: Duration, linger: Duration) async -> Task<Void, Never> {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        return Task.detached {
            var signalled = false
            for await _ in signals {
                signalled = true
                break
            }
            guard signalled, !Task.isCancelled else { return }
            let clock = ContinuousClock()
            let limit = clock.now + deadline + .seconds(2)
            while inFlight.current > 0, clock.now < limit { try? await Task.sleep(for: .milliseconds(20)) }
            let unanswered = inFlight.current
            try? await Task.sleep(for: linger)
            guard !Task.isCancelled else { return }
            printError(
                unanswered == 0
                    ? "serve: stopped; connections their clients kept open after their answers were closed"
                    : "serve: stopped with \(unanswered) requests unanswered after \(deadline) (Apple sends them again)"
            )
            exit(unanswered == 0 ? 0 : 75)
        }
    }
}
