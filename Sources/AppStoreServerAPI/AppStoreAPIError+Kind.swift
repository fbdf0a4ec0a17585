import FailureKind
import Foundation

// What each of the API client's failures asks of the operator (see FailureKind).

extension AppStoreAPIError: KindedFailure {
    /// Refused credentials are the configuration's to fix; any other answer Apple gives that the
    /// client did not retry is unexpected.
    package var failureKind: FailureKind { isCredentialsProblem ? .configuration : .unexpected }
}

extension RateLimitedUntil: KindedFailure {
    package var failureKind: FailureKind { .temporary }
    package var advice: String? {
        "Nothing applied was lost (each page is committed); run the same command again after \(resumeAt.formatted(.iso8601)) to resume."
    }
}

extension RetriesExhausted: KindedFailure {
    package var failureKind: FailureKind { .temporary }
    package var advice: String? { "Apple's API is unavailable. Nothing applied was lost (each page is committed); run again later." }
}

extension AppStoreTransportError: KindedFailure {
    package var failureKind: FailureKind { isRetryable ? .temporary : .unexpected }
}
