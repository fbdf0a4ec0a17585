package import Foundation

/// A row of `app_store.notifications`.
package struct NotificationRecord: Hashable, Sendable, LedgerRow {
    package enum Source: String, Sendable, Hashable, Codable {
        /// Delivered live by Apple to the app's webhook.
        case webhook
        /// Recovered by this tool from Get Notification History.
        case history
    }

    package var notificationUUID: UUID
    package var notificationType: String
    package var subtype: String?
    package var signedDate: Date
    package var environment: String
    /// The app's bundle ID (migration 0020): with the environment, the App Store the row belongs to.
    package var bundleId: String
    package var originalTransactionId: String?
    package var transactionId: String?
    package var signedPayload: String
    package var source: Source
    /// Its part in a refund request's episode, from its type's policy (not a column).
    package var refundEpisode: RefundEpisodeRole?

    package init(
        notificationUUID: UUID, notificationType: String, subtype: String?, signedDate: Date, environment: String, bundleId: String,
        originalTransactionId: String?, transactionId: String?, signedPayload: String, source: Source, refundEpisode: RefundEpisodeRole? = nil
    ) {
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.signedDate = signedDate
        self.environment = environment
        self.bundleId = bundleId
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.signedPayload = signedPayload
        self.source = source
        self.refundEpisode = refundEpisode
    }
}


extension NotificationRecord {
    /// `app_store.notifications`' columns (`signed_payload` aside, and `recorded_at`, the database's).
    package static let columns: [LedgerColumn<Self>] = [
        .uuid("notification_uuid", \.notificationUUID),
        .text("notification_type", \.notificationType),
        .text("subtype", \.subtype),
        .time("signed_date", \.signedDate),
        .text("environment", \.environment),
        .text("bundle_id", \.bundleId),
        .text("original_transaction_id", \.originalTransactionId),
        .text("transaction_id", \.transactionId),
        .text("source", \.source),
    ]

    package static let blank = NotificationRecord(
        notificationUUID: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), notificationType: "", subtype: nil, signedDate: Date(timeIntervalSince1970: 0), environment: "", bundleId: "",
        originalTransactionId: nil, transactionId: nil, signedPayload: "", source: .webhook
    )
}
