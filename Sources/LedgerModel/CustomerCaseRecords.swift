package import Foundation

/// A notification the ledger recorded for an account.
package struct RecordedNotification: Sendable, Codable, Hashable {
    package var notificationUUID: String
    package var type: String
    package var subtype: String?
    package var signedDate: Date
    /// `webhook` (the live server) or `history` (recovered by a run).
    package var source: String
    package var recordedAt: Date
    package var originalTransactionId: String

    package init(
        notificationUUID: String, type: String, subtype: String?, signedDate: Date, source: String, recordedAt: Date, originalTransactionId: String
    ) {
        self.notificationUUID = notificationUUID
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.source = source
        self.recordedAt = recordedAt
        self.originalTransactionId = originalTransactionId
    }
}

/// A row of `app_store.entitlements`.
package struct Entitlement: Sendable, Codable, Hashable {
    package var originalTransactionId: String
    package var productId: String?
    package var productType: String?
    package var expiresDate: Date?
    package var status: Int?

    package init(originalTransactionId: String, productId: String?, productType: String?, expiresDate: Date?, status: Int?) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.expiresDate = expiresDate
        self.status = status
    }
}
