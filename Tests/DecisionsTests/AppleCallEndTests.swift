import Decisions
import RemedyDecisions
import Testing

/// What a failed call that changes state at Apple means, from the facts alone (issue 63): one
/// vocabulary for refund answers, single extensions and mass extensions.
@Suite struct AppleCallEndTests {
    /// Apple's word to send again (429, 500 and 502 to 504, its "Errors to retry" codes:
    /// app-store-server-api.md §3.2): nothing applied, the same request may go again; Apple's
    /// status and code are kept.
    @Test func anErrorAppleSaysToSendAgainAfterIsNotTakenAndKeepsApplesStatus() {
        #expect(AppleCallEnd(.answered(status: 429, code: 4_290_000, message: "Rate limit exceeded.", retryable: true))
            == .notTaken(reason: "Apple answered HTTP 429, error 4290000 and asked to try again later", status: 429, code: 4_290_000))
        #expect(AppleCallEnd(.answered(status: 500, code: nil, message: nil, retryable: true))
            == .notTaken(reason: "Apple answered HTTP 500 and asked to try again later", status: 500, code: nil))
        // OriginalTransactionIdNotFoundRetryableError: a 404 Apple lists among the errors to retry.
        #expect(AppleCallEnd(.answered(status: 404, code: 4_040_006, message: nil, retryable: true))
            == .notTaken(reason: "Apple answered HTTP 404, error 4040006 and asked to try again later", status: 404, code: 4_040_006))
    }

    /// Any other error is Apple's refusal: the same request would be refused again.
    @Test func anyOtherErrorIsARefusalWithApplesWords() {
        #expect(AppleCallEnd(.answered(status: 403, code: 4_030_004, message: "Subscription extension ineligible.", retryable: false))
            == .refused(status: 403, code: 4_030_004, message: "Subscription extension ineligible."))
        #expect(AppleCallEnd(.answered(status: 404, code: 4_040_005, message: nil, retryable: false)) == .refused(status: 404, code: 4_040_005, message: nil))
        #expect(AppleCallEnd.describe(status: 400, code: 4_000_035, message: "Invalid request.") == "Apple answered HTTP 400, error 4000035: Invalid request.")
        #expect(AppleCallEnd.describe(status: 400, code: nil, message: String(repeating: "x", count: 300)).count == "Apple answered HTTP 400: ".count + 200)
    }

    /// A 401 says the JWT was refused: nothing applied, and nothing will be until the credentials
    /// are put right (the shells end the run after recording it).
    @Test func refusedCredentialsAreNotTakenWhateverTheRetryableFlag() {
        for retryable in [false, true] {
            #expect(AppleCallEnd(.answered(status: 401, code: nil, message: "Unauthenticated", retryable: retryable))
                == .notTaken(reason: "Apple answered HTTP 401: the credentials were refused", status: 401, code: nil))
        }
        #expect(AppleCallEnd.credentialsRefused(status: 401) && !AppleCallEnd.credentialsRefused(status: 403))
    }

    @Test func aLostAnswerMayHaveBeenAppliedAndARequestNeverSentWasNot() {
        #expect(AppleCallEnd(.answerLost(cause: "read timed out")) == .outcomeUnknown(cause: "read timed out"))
        #expect(AppleCallEnd(.neverSent(reason: "connection refused")) == .notTaken(reason: "not sent: connection refused"))
    }
}
