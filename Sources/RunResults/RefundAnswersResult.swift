import Decisions
import Foundation
package import RemedyDecisions

/// What the answering pass (`consumption-requests --answer`) did: one entry per open refund
/// request it looked at, soonest deadline first.
package struct RefundAnswersResult: Sendable, Codable, Hashable {
    package var answers: [RefundAnswerReport]
    /// Send Consumption Information requests made (a request sent again after Apple's 429 or
    /// 5xx counts each time).
    package var requestsToApple: Int
    /// Stopped on request before every open request was looked at: the rest stay open.
    package var stopped: Bool

    package init(answers: [RefundAnswerReport] = [], requestsToApple: Int = 0, stopped: Bool = false) {
        self.answers = answers
        self.requestsToApple = requestsToApple
        self.stopped = stopped
    }

    /// The number of requests by outcome.
    package var byOutcome: [String: Int] {
        answers.reduce(into: [:]) { counts, answer in counts[answer.outcome, default: 0] += 1 }
    }

    /// Requests not sent for a reason a person must look at (`invalid`, `failed`): exit code 3.
    package var needingAPerson: Int { answers.count { $0.needsAPerson } }
}
