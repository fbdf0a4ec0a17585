package import Foundation

/// How one call that changes state at Apple failed, as the client saw it: the facts, before what
/// they mean (`AppleCallEnd`). The shells turn the client's errors into these and nothing more.
package enum AppleCallFailure: Hashable, Sendable {
    /// Apple answered with this error (after the retries the endpoint's `RepeatRule` allows), and
    /// no earlier attempt may have reached Apple with its answer lost. `retryable`: one Apple says
    /// to send again after (429, 500, 502 to 504, and the codes Apple's App Store Server API error
    /// codes page lists under "Errors to retry": app-store-server-api.md §3.2), as the client judges it.
    case answered(status: Int, code: Int64?, message: String?, retryable: Bool)
    /// An attempt may have reached Apple, and its answer never came.
    case answerLost(cause: String)
    /// No attempt reached Apple: no connection made, or Apple's rate limit asked to wait beyond
    /// the run's bound.
    case neverSent(reason: String)
}

/// How one call that changes state at Apple ended, in the one vocabulary the machines that record
/// it read (refund answers, single and mass extensions: issue 63). What Apple's answers mean is
/// decided here, from the facts (`AppleCallFailure`), and tested without I/O (`AppleCallEndTests`).
package enum AppleCallEnd: Hashable, Sendable {
    /// Apple took it (2xx); for an extension, the new expiry when Apple gave one.
    case accepted(status: Int, effectiveDate: Date? = nil)
    /// Apple refused it with an error it does not say to send again after: nothing was applied,
    /// and the same request would be refused again.
    case refused(status: Int, code: Int64?, message: String?)
    /// It may have reached Apple and been applied; no answer came.
    case outcomeUnknown(cause: String)
    /// Apple applied nothing, and the same request may be made again: it never reached Apple, or
    /// Apple answered with an error it says to send again after (429, a 5xx), or refused the
    /// credentials (401: every request would be refused until they are put right). `status` and
    /// `code` are Apple's when it answered.
    case notTaken(reason: String, status: Int? = nil, code: Int64? = nil)

    package init(_ failure: AppleCallFailure) {
        switch failure {
        case .answered(let status, let code, let message, let retryable):
            let answer = Self.describe(status: status, code: code, message: nil)
            if Self.credentialsRefused(status: status) {
                self = .notTaken(reason: "\(answer): the credentials were refused", status: status, code: code)
            } else if retryable {
                self = .notTaken(reason: "\(answer) and asked to try again later", status: status, code: code)
            } else {
                self = .refused(status: status, code: code, message: message)
            }
        case .answerLost(let cause):
            self = .outcomeUnknown(cause: cause)
        case .neverSent(let reason):
            self = .notTaken(reason: "not sent: \(reason)")
        }
    }

    /// Apple refused the JWT (401 Unauthorized): no request of the run will be taken.
    package static func credentialsRefused(status: Int) -> Bool { status == 401 }

    /// Apple's answer in one line: "Apple answered HTTP 400, error 4000035: Invalid request."
    package static func describe(status: Int, code: Int64?, message: String?) -> String {
        "Apple answered HTTP \(status)" + (code.map { ", error \($0)" } ?? "") + (message.map { ": \($0.prefix(200))" } ?? "")
    }
}
