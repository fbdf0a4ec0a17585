package import FailureKind
import Foundation

// What each of the API client's failures asks of the operator (see FailureKind).

extension AppStoreAPIError: KindedFailure {
    /// Refused credentials are the configuration's to fix; any other answer Apple gives that the
    /// client did not retry is unexpected.
    package var failureKind: FailureKind { isCredentialsProblem ? .configuration : .unexpected }

    /// A 401 is wrong credentials, or, in Production, an app that has never had a release: Apple
    /// opens Production's endpoints with the first release (developer forums, thread 742923).
    package var advice: String? {
        guard isCredentialsProblem else { return nil }
        return "Check the key file, key ID, issuer ID and bundle ID; in Production, Apple also answers 401 to an app that has never had a release"
    }
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

extension OutcomeUnknown: KindedFailure {
    package var failureKind: FailureKind { .temporary }
    package var advice: String? { "Apple may have taken it: look before sending it again (the command says where it records what it sent)." }
}
