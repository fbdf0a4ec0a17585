import Foundation
import LiveReceiver
import UnixSignals

/// The bound on `serve`'s graceful shutdown. At SIGTERM or SIGINT the service group stops
/// accepting and waits for every connection to close; a client that keeps its connection open
/// after its answer (or never sends the rest of a request) would keep `serve` running for ever,
/// past any orchestrator's grace period. This watch waits for the requests being answered (each
/// within the receiver's deadline; one whose body is still arriving is not waited for), gives
/// the clients `linger` to close their connections, and then ends the process with exit 0:
/// nothing is lost, since a notification is answered 200 only after its commit, and one cut off
/// unanswered is sent again by Apple.
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
            while inFlight.current.answering > 0, clock.now < limit { try? await Task.sleep(for: .milliseconds(20)) }
            // A body that completes from now on (during the linger) is answered 503, and Apple
            // sends it again: none starts answering after this decided there is nothing to wait for.
            inFlight.stop()
            // One that began between the last look and the stop is waited for too (within the limit).
            while inFlight.current.answering > 0, clock.now < limit { try? await Task.sleep(for: .milliseconds(20)) }
            let unanswered = inFlight.current.answering
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
