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
    /// `Production` or `Sandbox` (nil in rows written before migration 0005 that it could not tell).
    public var environment: String?

    public init(
        originalTransactionId: String, productId: String?, status: Int?, expiresDate: Date?, autoRenewStatus: Int?,
        autoRenewProductId: String?, isInBillingRetry: Bool?, gracePeriodExpiresDate: Date?, lastSignedDate: Date,
        environment: String? = nil
    ) {
        self.environment = environment
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
    /// Accounts pass 2 compared with Apple's answer: recorded with everything the answer changed.
    public var accounts: [AccountVerification] = []
    /// For a run's record of what it changed (`app_store.run_subscription_changes`): each
    /// subscription's row before the run first changed it (nil: there was none). Written with
    /// a run ID only, and only for the subscriptions the batch did change.
    public var subscriptionsBefore: [String: SubscriptionRecord?] = [:]

    public init() {}

    public var isEmpty: Bool {
        notifications.isEmpty && transactions.isEmpty && subscriptions.isEmpty && rejected.isEmpty && accounts.isEmpty
    }
}

/// One Apple account as pass 2 left it (`app_store.accounts`, `app_store.account_members`).
public struct AccountVerification: Hashable, Sendable {
    public enum Revision: Hashable, Sendable {
        /// Transaction history was not asked: the stored revision stays.
        case unchanged
        /// The last page's revision of a complete ascending fetch.
        case store(String)
        /// Apple refused the stored revision and no complete fetch replaced it: the next starts over.
        case forget
    }

    public var environment: String
    /// The account's key as pass 2 sees it (the ledger keeps the numerically smallest
    /// originalTransactionId of the account, merging accounts found to be one).
    public var accountId: String
    /// Every originalTransactionId Apple's answers showed in the account.
    public var members: [String]
    public var revision: Revision
    /// Whether the whole answer verified: only then is the account recorded as verified now.
    /// An answer with a rejected (or not yet verifiable) payload leaves `verified_at` as it was,
    /// so that the account is selected and asked again.
    public var verified: Bool
    /// Whether the check included the account's transaction history (then `transactions_verified_at` moves too).
    public var transactionsChecked: Bool

    public init(environment: String, accountId: String, members: [String], revision: Revision, verified: Bool = true, transactionsChecked: Bool = false) {
        self.transactionsChecked = transactionsChecked
        self.environment = environment
        self.accountId = accountId
        self.members = members
        self.revision = revision
        self.verified = verified
    }
}

/// What the ledger holds of one Apple account for pass 2: its row (nil before its first repair),
/// and the rows of its members and of the originalTransactionIds asked about.
public struct StoredAccountState: Sendable {
    public var accountId: String?
    public var revision: String?
    public var members: [String]
    public var subscriptions: [String: SubscriptionRecord]
    public var transactions: [TransactionRecord]

    public init(
        accountId: String?, revision: String?, members: [String], subscriptions: [String: SubscriptionRecord],
        transactions: [TransactionRecord]
    ) {
        self.accountId = accountId
        self.revision = revision
        self.members = members
        self.subscriptions = subscriptions
        self.transactions = transactions
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
        /// When the ledger last wrote the row (nil: unknown, taken as new).
        public var recordedAt: Date?
        public init(
            transactionId: String, productType: String?, purchaseDate: Date?, expiresDate: Date?, revocationDate: Date?, signedDate: Date,
            recordedAt: Date? = nil
        ) {
            self.recordedAt = recordedAt
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
        /// When the ledger recorded it (nil: unknown, taken as new).
        public var recordedAt: Date?
        public init(type: String, subtype: String?, signedDate: Date, recordedAt: Date? = nil) {
            self.recordedAt = recordedAt
            self.type = type
            self.subtype = subtype
            self.signedDate = signedDate
        }
    }

    public var originalTransactionId: String
    public var subscription: SubscriptionRecord?
    public var transactions: [TransactionFacts]
    public var notifications: [NotificationFacts]
    /// The account the originalTransactionId belongs to, when pass 2 has asked Apple about it.
    public var accountId: String?
    /// When pass 2 last compared the account with Apple (nil: never), and last did so with its
    /// whole transaction history.
    public var verifiedAt: Date?
    public var transactionsVerifiedAt: Date?

    public init(
        originalTransactionId: String, subscription: SubscriptionRecord?, transactions: [TransactionFacts], notifications: [NotificationFacts],
        accountId: String? = nil, verifiedAt: Date? = nil, transactionsVerifiedAt: Date? = nil
    ) {
        self.transactionsVerifiedAt = transactionsVerifiedAt
        self.accountId = accountId
        self.verifiedAt = verifiedAt
        self.originalTransactionId = originalTransactionId
        self.subscription = subscription
        self.transactions = transactions
        self.notifications = notifications
    }
}
