package import Foundation

/// When a CONSUMPTION_REQUEST must be answered, and where.
///
/// Apple's Send Consumption Information page: "Respond within 12 hours of receiving the
/// `CONSUMPTION_REQUEST` notification" (developer.apple.com/documentation/appstoreserverapi/send-consumption-information).
/// The request comes for any product type since API 1.19 (2025-12-10), which also made
/// `PUT /inApps/v2/transactions/consumption/{transactionId}` the endpoint (v1 is deprecated).
/// The 12 hours are counted from when Apple sent the notification: its first send attempt, else
/// (nothing recorded of the attempts) its `signedDate`, when Apple created it.
package enum ConsumptionDeadline {
    package static let answerWithin: TimeInterval = 12 * 3600
    package static let endpoint = "PUT /inApps/v2/transactions/consumption/{transactionId}"
    package static let documentation = "https://developer.apple.com/documentation/appstoreserverapi/send-consumption-information"

    /// When Apple sent it: the first send attempt, else its `signedDate`.
    package static func sentAt(firstAttempt: Date?, signedDate: Date) -> Date { firstAttempt ?? signedDate }

    /// The last moment to answer it.
    package static func deadline(firstAttempt: Date?, signedDate: Date) -> Date {
        sentAt(firstAttempt: firstAttempt, signedDate: signedDate).addingTimeInterval(answerWithin)
    }

    /// An episode's deadline (issue 62): while a refund request is open Apple asks again every few
    /// hours, each a new CONSUMPTION_REQUEST to answer within 12 hours (an Apple engineer, developer
    /// forum thread 756151; endpoints-that-change.md §9), so the episode is answerable until 12
    /// hours after its latest request was sent, whenever the first was. `app_store.settle_consumption_requests`
    /// (migration 0027) keeps the same on the episode's row: its latest request's deadline.
    package static func episodeDeadline(requestsSent: [Date]) -> Date? {
        requestsSent.max().map { $0.addingTimeInterval(answerWithin) }
    }
}
