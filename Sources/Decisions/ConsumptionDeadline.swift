import Foundation

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
}
