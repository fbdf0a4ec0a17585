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
        var inFlight: [String: [CheckedContinuation<VerificationOutcome<Void>?, Never>]] = [:]
    }

    private enum Claim {
        case cached, waiting, mine
    }

    private let state = Mutex(State())

    /// The outcome of `check` for the chain `key`, from the cache when a good answer holds at
    /// `now`, else shared with a check in flight, else from calling it. A good answer is kept
    /// from `now` until `now + maximumAge` or `expiry`, whichever comes first.
    func outcome(
        key: String, now: Date, expiry: Date, check: () async -> VerificationOutcome<Void>
    ) async -> VerificationOutcome<Void> {
        let shared: VerificationOutcome<Void>? = await withCheckedContinuation { continuation in
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
            case .cached: continuation.resume(returning: .verified(()))
            case .mine: continuation.resume(returning: nil)
            case .waiting: break
            }
        }
        if let shared { return shared }

        let outcome = await check()
        let waiting = state.withLock { state in
            if case .verified = outcome, now < expiry {
                if state.good.count >= Self.capacity { state.good = [:] }
                state.good[key] = now...min(now + Self.maximumAge, expiry)
            }
            return state.inFlight.removeValue(forKey: key) ?? []
        }
        for continuation in waiting { continuation.resume(returning: outcome) }
        return outcome
    }
}
