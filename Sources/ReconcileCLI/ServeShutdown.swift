import Foundation
import Synchronization
import UnixSignals

/// The notification POSTs `serve` holds at this moment. Each is first `reading` its body (the
/// client still sending): any number may, but together they hold at most `readingBytes` bytes,
/// so that slow clients cost memory only for what they sent and cannot keep a genuine POST out.
/// Then it is `answering` (verifying and recording): at most `maximum` at once. Past either
/// bound the answer is 503 at once. A graceful stop waits for the answering ones only: a request
/// whose body has not all come cannot be answered 200 anyway, and Apple sends it again.
final class RequestsInFlight: Sendable {
    struct Counts: Sendable {
        var reading = 0
        var readingBytes = 0
        var answering = 0
        /// A graceful stop began: no request starts answering any more (503 instead).
        var stopping = false
    }

    let maximum: Int
    let readingBytes: Int
    private let counts = Mutex(Counts())

    init(maximum: Int = .max, readingBytes: Int = .max) {
        self.maximum = max(1, maximum)
        self.readingBytes = max(1, readingBytes)
    }

    var current: Counts { counts.withLock { $0 } }

    /// From now on `answering()` is false: the requests being answered are all the stop waits for.
    func stop() { counts.withLock { $0.stopping = true } }

    /// A request whose body is about to be read.
    func admit() -> Admission {
        counts.withLock { $0.reading += 1 }
        return Admission(self)
    }

    /// One admitted request: `received` for each part of its body, `answering()` once it is
    /// read, `leave()` when answered.
    final class Admission: Sendable {
        private enum Phase {
            case reading(bytes: Int)
            case answering
            case done
        }

        private let inFlight: RequestsInFlight
        private let phase = Mutex(Phase.reading(bytes: 0))

        fileprivate init(_ inFlight: RequestsInFlight) { self.inFlight = inFlight }

        /// Counts `count` more bytes of the body; false when the bodies being read would hold
        /// more than their bound (the request is then refused, its bytes let go).
        func received(_ count: Int) -> Bool {
            phase.withLock { phase in
                guard case .reading(let bytes) = phase else { return false }
                let fits = inFlight.counts.withLock { counts in
                    guard counts.readingBytes + count <= inFlight.readingBytes else { return false }
                    counts.readingBytes += count
                    return true
                }
                if fits { phase = .reading(bytes: bytes + count) }
                return fits
            }
        }

        /// The body is read: false when `maximum` requests are being answered already, or `serve` is stopping.
        func answering() -> Bool {
            phase.withLock { phase in
                guard case .reading(let bytes) = phase else {
                    if case .answering = phase { return true }
                    return false
                }
                let admitted = inFlight.counts.withLock { counts in
                    counts.reading -= 1
                    counts.readingBytes -= bytes
                    guard counts.answering < inFlight.maximum, !counts.stopping else { return false }
                    counts.answering += 1
                    return true
                }
                phase = admitted ? .answering : .done
                return admitted
            }
        }

        func leave() {
            phase.withLock { phase in
                inFlight.counts.withLock { counts in
                    switch phase {
                    case .reading(let bytes):
                        counts.reading -= 1
                        counts.readingBytes -= bytes
                    case .answering:
                        counts.answering -= 1
                    case .done:
                        break
                    }
                }
                phase = .done
            }
        }
    }
}

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
