import AppStoreServerAPI
import Decisions
import RemedyDecisions

extension AppleCallFailure {
    /// The facts of a failed call that changes state at Apple, read off the client's error; nil
    /// for an error that is not about the call (the caller throws it on). What they mean is
    /// `AppleCallEnd`'s to say.
    init?(clientError error: any Error) {
        switch error {
        case let error as AppStoreAPIError:
            self = .answered(status: error.httpStatus, code: error.code?.rawValue, message: error.message, retryable: error.isRetryable)
        case let error as OutcomeUnknown:
            self = .answerLost(cause: error.cause)
        case let error as RateLimitedUntil:
            self = error.anyMayHaveArrived ? .answerLost(cause: error.description) : .neverSent(reason: error.description)
        case let error as RetriesExhausted:
            if error.anyMayHaveArrived {
                self = .answerLost(cause: error.description)
            } else if let last = error.lastError as? AppStoreAPIError {
                self.init(clientError: last)
            } else {
                self = .neverSent(reason: error.description)
            }
        case let error as AppStoreTransportError:
            self = error.attemptEnd == .noAnswer(mayHaveArrived: false) ? .neverSent(reason: error.description) : .answerLost(cause: error.description)
        default:
            return nil
        }
    }
}
