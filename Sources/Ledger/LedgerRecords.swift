import Foundation

/// A row of `app_store.notifications`.
public struct NotificationRecord: Hashable, Sendable {
    public enum Source: String, Sendable, Hashable, Codable {
        /// Delivered live by Apple to the app's webhook.
        case webhook
        /// Recovered by this tool from Get Notification History.
        case history
    }

    public var notificationUUID: UUID
    public var notificationType: String
    public var subtype: String?
    public var signedDate: Date
    public var environment: String
    public var originalTransactionId: String?
    public var transactionId: String?
    public var signedPayload: String
    public var source: Source

    public init(
        notificationUUID: UUID, notificationType: String, subtype: String?, signedDate: Date, environment: String,
        originalTransactionId: String?, transactionId: String?, signedPayload: String, source: Source
    ) {
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.signedDate = signedDate
        self.environment = environment
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.signedPayload = signedPayload
        self.source = source
    }
}

/// A row of `app_store.transactions`: the newest signed version of a transaction.
public struct TransactionRecord: Hashable, Sendable {
    public var transactionId: String
    public var originalTransactionId: String
    public var productId: String?
    public var productType: String?
    public var purchaseDate: Date?
    public var expiresDate: Date?
    public var revocationDate: Date?
    public var revocationReason: Int?
    public var isUpgraded: Bool?
    public var signedDate: Date
    public var environment: String?
    public var signedTransaction: String

    public init(
        transactionId: String, originalTransactionId: String, productId: String?, productType: String?, purchaseDate: Date?,
        expiresDate: Date?, revocationDate: Date?, revocationReason: Int?, isUpgraded: Bool?, signedDate: Date,
        environment: String?, signedTransaction: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.isUpgraded = isUpgraded
        self.signedDate = signedDate
        self.environment = environment
        self.signedTransaction = signedTransaction
    }
}

/// A row of `app_store.subscriptions`: an auto-renewable subscription's state as of
/// `lastSignedDate`. Information signed earlier never replaces it.
public struct SubscriptionRecord: Hashable, Sendable, Codable {
    public var originalTransactionId: String
    public var productId: String?
    /// Apple's 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
    public var status: Int?
    public var expiresDate: Date?
    /// Apple's 0 off, 1 on.
    public var autoRenewStatus: Int?
    public var autoRenewProductId: String?
    public var isInBillingRetry: Bool?
    public var gracePeriodExpiresDate: Date?
    public var lastSignedDate: Date

    public init(
        originalTransactionId: String, productId: String?, status: Int?, expiresDate: Date?, autoRenewStatus: Int?,
        autoRenewProductId: String?, isInBillingRetry: Bool?, gracePeriodExpiresDate: Date?, lastSignedDate: Date
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.status = status
        self.expiresDate = expiresDate
        self.autoRenewStatus = autoRenewStatus
        self.autoRenewProductId = autoRenewProductId
        self.isInBillingRetry = isInBillingRetry
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.lastSignedDate = lastSignedDate
    }
}

/// A row of `app_store.rejected_payloads`.
public struct RejectedPayloadRecord: Hashable, Sendable {
    public var source: String
    public var notificationUUID: String?
    public var reason: String
    public var detail: String
    public var signedPayload: String

    public init(source: String, notificationUUID: String?, reason: String, detail: String, signedPayload: String) {
        self.source = source
        self.notificationUUID = notificationUUID
        self.reason = reason
        self.detail = detail
        self.signedPayload = signedPayload
    }
}

/// What one database transaction writes: a page's worth of recovered notifications.
public struct LedgerBatch: Hashable, Sendable {
    public var notifications: [NotificationRecord] = []
    public var transactions: [TransactionRecord] = []
    public var subscriptions: [SubscriptionRecord] = []
    public var rejected: [RejectedPayloadRecord] = []
    /// Get Transaction History revisions to store, per customer, with everything they cover.
    public var revisions: [String: String] = [:]
    /// Customers whose stored revision Apple refused: deleted, so the next fetch starts over.
    public var revisionsToForget: [String] = []
    /// For a run's record of what it changed (`app_store.run_subscription_changes`): each
    /// subscription's row before the run first changed it (nil: there was none). Written with
    /// a run ID only, and only for the subscriptions the batch did change.
    public var subscriptionsBefore: [String: SubscriptionRecord?] = [:]

    public init() {}

    public var isEmpty: Bool {
        notifications.isEmpty && transactions.isEmpty && subscriptions.isEmpty && rejected.isEmpty && revisions.isEmpty
            && revisionsToForget.isEmpty
    }
}

/// What a batch actually changed. Rows may differ from the plan when a live webhook wrote the
/// same notification, or newer state, between the comparison and the write.
public struct LedgerBatchOutcome: Hashable, Sendable {
    public var insertedNotifications: Set<UUID> = []
    public var changedTransactions: Set<String> = []
    public var changedSubscriptions: Set<String> = []
    public init() {}
}

extension Date {
    /// UNIX milliseconds, the precision of every time Apple sends: compare times in these, not
    /// as floating-point seconds, which lose exactness through the database's microseconds.
    public var unixMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}

/// What the gap rules look at for one customer: the subscription row, the transactions and the
/// notifications the ledger holds.
public struct CustomerLedgerView: Hashable, Sendable {
    public struct TransactionFacts: Hashable, Sendable {
        public var transactionId: String
        public var productType: String?
        public var purchaseDate: Date?
        public var expiresDate: Date?
        public var revocationDate: Date?
        public var signedDate: Date
        public init(transactionId: String, productType: String?, purchaseDate: Date?, expiresDate: Date?, revocationDate: Date?, signedDate: Date) {
            self.transactionId = transactionId
            self.productType = productType
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.revocationDate = revocationDate
            self.signedDate = signedDate
        }
    }

    public struct NotificationFacts: Hashable, Sendable {
        public var type: String
        public var subtype: String?
        public var signedDate: Date
        public init(type: String, subtype: String?, signedDate: Date) {
            self.type = type
            self.subtype = subtype
            self.signedDate = signedDate
        }
    }

    public var originalTransactionId: String
    public var subscription: SubscriptionRecord?
    public var transactions: [TransactionFacts]
    public var notifications: [NotificationFacts]

    public init(originalTransactionId: String, subscription: SubscriptionRecord?, transactions: [TransactionFacts], notifications: [NotificationFacts]) {
        self.originalTransactionId = originalTransactionId
        self.subscription = subscription
        self.transactions = transactions
        self.notifications = notifications
    }
}
