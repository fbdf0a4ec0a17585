import Foundation
import Synchronization

/// The good answers of online checks (current-time validation and OCSP for the leaf and the
/// intermediate), one per chain, each kept for at most `maximumAge` and never past the moment a
/// certificate of the chain expires, as Apple's libraries keep verified chains. Apple signs with
/// a handful of chains, so without it every payload would cost two OCSP round trips: three per
/// notification.
///
/// Concurrent checks of one chain share the one in flight: the first caller asks, the others wait
/// for its outcome. Only good answers are kept: a revoked certificate, an unreachable responder
/// (retry later) or anything else is asked again by the next payload.
final class OnlineCheckCache: Sendable {
    /// Apple's libraries keep a verified chain 15 minutes.
    static let maximumAge: TimeInterval = 15 * 60
    /// More distinct chains than this that passed online checks means something other than Apple
    /// is signing; the cache then starts over rather than grow.
    static let capacity = 64

    private struct State {
        /// Per chain (its JWS header), the interval in which its good answer holds.
        var good: [String: ClosedRange<Date>] = [:]
        /// Per chain being checked, the callers waiting for the outcome.
        var inFlight: [String: [CheckedContinuation<Shared, Never>]] = [:]
    }

    private enum Claim {
        case cached, waiting, mine
    }

    /// What a caller is told when it wakes: the outcome, or to check itself (the check is its).
    private enum Shared: Sendable {
        case outcome(VerificationOutcome<Void>)
        case checkYourself
    }

    private let state = Mutex(State())

    /// The outcome of `check` for the chain `key`, from the cache when a good answer holds at
    /// `now`, else shared with a check in flight, else from calling it. A good answer is kept
    /// from `now` until `now + maximumAge`, `expiry` or the time `check` says its answer holds
    /// until (the OCSP answers' `nextUpdate`), whichever comes first.
    ///
    /// A caller whose own task was cancelled during its check does not pass that outcome on: the
    /// waiting callers were not cancelled, so the first of them checks afresh.
    func outcome(
        key: String, now: Date, expiry: Date, check: () async -> (outcome: VerificationOutcome<Void>, holdsUntil: Date?)
    ) async -> VerificationOutcome<Void> {
        let shared: Shared = await withCheckedContinuation { continuation in
            let claim = state.withLock { state -> Claim in
                if let good = state.good[key], good.contains(now) { return .cached }
                if state.inFlight[key] != nil {
                    state.inFlight[key]!.append(continuation)
                    return .waiting
                }
                state.inFlight[key] = []
                return .mine
            }
            switch claim {
            case .cached: continuation.resume(returning: .outcome(.verified(())))
            case .mine: continuation.resume(returning: .checkYourself)
            case .waiting: break
            }
        }
        if case .outcome(let outcome) = shared { return outcome }

        let (outcome, holdsUntil) = await check()
        let verified = outcome.verifiedPayload != nil
        let cancelled = Task.isCancelled
        let (successor, waiting) = state.withLock { state in
            let until = min(now + Self.maximumAge, expiry, holdsUntil ?? expiry)
            if verified, now < until {
                if state.good.count >= Self.capacity { state.good = [:] }
                state.good[key] = now...until
            }
            let waiting = state.inFlight.removeValue(forKey: key) ?? []
            // A failure of a cancelled check is not the waiters': the first checks afresh,
            // the others wait for it.
            if cancelled, !verified, let first = waiting.first {
                state.inFlight[key] = Array(waiting.dropFirst())
                return (Optional(first), [CheckedContinuation<Shared, Never>]())
            }
            return (nil, waiting)
        }
        successor?.resume(returning: .checkYourself)
        for continuation in waiting { continuation.resume(returning: .outcome(outcome)) }
        return outcome
    }
}
