import Synchronization

/// The notification POSTs `serve` holds at this moment. Each is first `reading` its body (the
/// client still sending): any number may, but together they hold at most `readingBytes` bytes,
/// so that slow clients cost memory only for what they sent and cannot keep a genuine POST out.
/// Then it is `answering` (verifying and recording): at most `maximum` at once. Past either
/// bound the answer is 503 at once. A graceful stop waits for the answering ones only: a request
/// whose body has not all come cannot be answered 200 anyway, and Apple sends it again.
package final class RequestsInFlight: Sendable {
    package struct Counts: Sendable {
        package var reading = 0
        package var readingBytes = 0
        package var answering = 0
        /// A graceful stop began: no request starts answering any more (503 instead).
        package var stopping = false
    }

    package let maximum: Int
    package let readingBytes: Int
    private let counts = Mutex(Counts())

    package init(maximum: Int = .max, readingBytes: Int = .max) {
        self.maximum = max(1, maximum)
        self.readingBytes = max(1, readingBytes)
    }

    package var current: Counts { counts.withLock { $0 } }

    /// From now on `answering()` is false: the requests being answered are all the stop waits for.
    package func stop() { counts.withLock { $0.stopping = true } }

    /// A request whose body is about to be read.
    package func admit() -> Admission {
        counts.withLock { $0.reading += 1 }
        return Admission(self)
    }

    /// One admitted request: `received` for each part of its body, `answering()` once it is
    /// read, `leave()` when answered.
    package final class Admission: Sendable {
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
        package func received(_ count: Int) -> Bool {
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
        package func answering() -> Bool {
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

        package func leave() {
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
