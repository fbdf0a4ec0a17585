package import Foundation
import LedgerModel
import SignedData

/// When a refund request (CONSUMPTION_REQUEST) is settled: once a decision of its episode
/// (`NotificationTypePolicy.refundEpisode == .decision`: REFUND, REFUND_DECLINED) signed after it
/// is known. Until then the decision may be the notification that was lost, so the account's rows
/// are in doubt (`RecoveryEvidence`, `UncheckedRefundFlow`).
package enum RefundRequestSettlement {
    /// Whether a decision signed after `requestSignedAt` is among `notifications` (type, signing).
    package static func isSettled(requestSignedAt: Date, among notifications: some Sequence<(type: String, signedDate: Date)>) -> Bool {
        notifications.contains { NotificationType(rawValue: $0.type).policy.refundEpisode == .decision && $0.signedDate > requestSignedAt }
    }
}
