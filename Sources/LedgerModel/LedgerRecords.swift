import Crypto
package import SignedData
package import Foundation

/// A row of `app_store.rejected_payloads`: what Apple's API answered is kept whole
/// (`keptWhole`); what anyone can POST (the webhook) as its digest, size and first
/// `summaryPrefixBytes` bytes. At the webhook a repeat of the same bytes for the same reason only
/// counts on its first row (for a payload whose signature was proven, the same header and
/// payload, whatever the signature's bytes).
package struct RejectedPayloadRecord: Hashable, Sendable {
    package static let summaryPrefixBytes = 256

    package var source: String
    package var notificationUUID: String?
    package var reason: String
    package var detail: String
    /// The whole payload when `keptWhole`, else its first `summaryPrefixBytes` bytes.
    package var signedPayload: String
    package var keptWhole: Bool
    package var sha256: [UInt8]
    package var bytes: Int
    /// The customer the payload's unverified content names, for repairing them; never applied.
    package var unverifiedOriginalTransactionId: String?

    /// - Parameter digestOfSigningInput: the digest is of the JWS's header and payload
    ///   (`header.payload`), not of its whole text: for a payload whose signature was proven, so
    ///   that a copy re-signed by anyone as (r, n − s), which verifies all the same (ECDSA
    ///   signatures are malleable, and Apple's are not normalized), is a repeat of the same row.
    package init(
        source: String, notificationUUID: String?, reason: String, detail: String, signedPayload: String, keptWhole: Bool = true,
        unverifiedOriginalTransactionId: String? = nil, digestOfSigningInput: Bool = false
    ) {
        self.source = source
        self.notificationUUID = notificationUUID
        self.reason = reason
        self.detail = detail
        self.keptWhole = keptWhole
        let signed = digestOfSigningInput ? signedPayload.utf8.lastIndex(of: UInt8(ascii: ".")).map { signedPayload.utf8[..<$0] } : nil
        self.sha256 = Array(SHA256.hash(data: Array(signed ?? signedPayload.utf8[...])))
        self.bytes = signedPayload.utf8.count
        // A cut inside a character ends in U+FFFD: the summary is for people, the digest for matching.
        self.signedPayload = keptWhole ? signedPayload : String(decoding: signedPayload.utf8.prefix(Self.summaryPrefixBytes), as: UTF8.self)
        self.unverifiedOriginalTransactionId = unverifiedOriginalTransactionId
    }
}

/// What one database transaction writes: a page's worth of recovered notifications.
package struct LedgerBatch: Hashable, Sendable {
    package var notifications: [NotificationRecord] = []
    package var transactions: [TransactionRecord] = []
    package var subscriptions: [SubscriptionRecord] = []
    package var rejected: [RejectedPayloadRecord] = []
    /// Refund requests to answer, one per CONSUMPTION_REQUEST of `notifications`: written when
    /// their notification is (`app_store.consumption_requests`).
    package var consumptionRequests: [ConsumptionRequestRecord] = []
    /// Accounts pass 2 compared with Apple's answer: recorded with everything the answer changed.
    package var accounts: [AccountVerification] = []
    /// For a run's record of what it changed (`app_store.run_subscription_changes`): each
    /// subscription's row before the run first changed it (nil: there was none). Written with
    /// a run ID only, and only for the subscriptions the batch did change.
    package var subscriptionsBefore: [String: SubscriptionRecord?] = [:]
    /// What the batch's changes are recorded as in the change feed (`app_store.changes`).
    package var cause: ChangeCause
    /// The notification behind each subscription (by originalTransactionId) and transaction (by
    /// transactionId) the batch writes, when a notification is behind it: the change feed's `notification_uuid`.
    package var subscriptionNotifications: [String: UUID] = [:]
    package var transactionNotifications: [String: UUID] = [:]
    /// Where the notifications the batch records are to be re-delivered (`app_store.deliveries`,
    /// queued in the same transaction): the team's webhook handler, or nil.
    package var deliverTo: String?

    package init(cause: ChangeCause) {
        self.cause = cause
    }

    package var isEmpty: Bool {
        notifications.isEmpty && transactions.isEmpty && subscriptions.isEmpty && rejected.isEmpty && accounts.isEmpty
    }

    /// The transactions, by App Store (bundle ID and environment), whose refund requests or
    /// Apple's decisions on them this batch records: their episodes are settled in the batch's
    /// transaction (`app_store.settle_consumption_requests`, migration 0022).
    package var refundRequestTransactions: [(store: (bundleId: String, environment: String), transactions: [String])] {
        var found: [String: (store: (bundleId: String, environment: String), transactions: Set<String>)] = [:]
        for notification in notifications where notification.refundEpisode != nil {
            guard let transaction = notification.transactionId else { continue }
            let key = notification.bundleId + "\u{0}" + notification.environment
            found[key, default: ((notification.bundleId, notification.environment), [])].transactions.insert(transaction)
        }
        return found.keys.sorted().map { key in (found[key]!.store, found[key]!.transactions.sorted()) }
    }
}

/// One Apple account as pass 2 left it (`app_store.accounts`, `app_store.account_members`).
package struct AccountVerification: Hashable, Sendable {
    package enum Revision: Hashable, Sendable {
        /// Transaction history was not asked: the stored revision stays.
        case unchanged
        /// The last page's revision of a complete ascending fetch.
        case store(String)
        /// Apple refused the stored revision and no complete fetch replaced it: the next starts over.
        case forget
    }

    /// The App Store the account is of.
    package var pair: AppStorePair
    /// The account's key as pass 2 sees it (the ledger keeps the numerically smallest
    /// originalTransactionId of the account, merging accounts found to be one).
    package var accountId: String
    /// Every originalTransactionId Apple's answers showed in the account.
    package var members: [String]
    package var revision: Revision
    /// Whether the whole answer verified: only then is the account recorded as verified now.
    /// An answer with a rejected (or not yet verifiable) payload leaves `verified_at` as it was,
    /// so that the account is selected and asked again.
    package var verified: Bool
    /// Whether the check included the account's transaction history (then `transactions_verified_at` moves too).
    package var transactionsChecked: Bool
    /// The error code Apple answered when it does not know the account (4040001, 4040010,
    /// 4000006): the account is settled with that answer (`app_store.accounts.apple_answer`,
    /// migration 0013) instead of being asked again every run. Nil: Apple answered for it.
    package var appleAnswer: String?

    package init(
        pair: AppStorePair, accountId: String, members: [String], revision: Revision, verified: Bool = true, transactionsChecked: Bool = false,
        appleAnswer: String? = nil
    ) {
        self.appleAnswer = appleAnswer
        self.transactionsChecked = transactionsChecked
        self.pair = pair
        self.accountId = accountId
        self.members = members
        self.revision = revision
        self.verified = verified
    }
}

/// What the ledger holds of one Apple account for pass 2: its row (nil before its first repair),
/// and the rows of its members and of the originalTransactionIds asked about.
package struct StoredAccountState: Sendable {
    package var accountId: String?
    package var revision: String?
    package var members: [String]
    package var subscriptions: [String: SubscriptionRecord]
    package var transactions: [TransactionRecord]

    package init(
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
package struct LedgerBatchOutcome: Hashable, Sendable {
    package var insertedNotifications: Set<UUID> = []
    /// The transaction and subscription rows the batch moved to its newer information: their
    /// content changed, or only their signing time when the newer version said the same.
    package var writtenTransactions: Set<String> = []
    package var writtenSubscriptions: Set<String> = []
    /// Those of them whose content changed (what the change feed and a run's record of changes
    /// hold, and what a repair counts).
    package var changedTransactions: Set<String> = []
    package var changedSubscriptions: Set<String> = []
    package init() {}
}

extension Date {
    /// UNIX milliseconds, the precision of every time Apple sends: compare times in these, not
    /// as floating-point seconds, which lose exactness through the database's microseconds.
    package var unixMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}

/// What the gap rules look at for one customer: the subscription row, the transactions and the
/// notifications the ledger holds.
package struct CustomerLedgerView: Hashable, Sendable {
    package struct TransactionFacts: Hashable, Sendable {
        package var transactionId: String
        package var productType: String?
        package var purchaseDate: Date?
        package var expiresDate: Date?
        package var revocationDate: Date?
        package var signedDate: Date
        /// When the ledger last wrote the row (nil: unknown, taken as new).
        package var recordedAt: Date?
        /// The customer upgraded from this transaction to another plan of its group.
        package var isUpgraded: Bool?
        package init(
            transactionId: String, productType: String?, purchaseDate: Date?, expiresDate: Date?, revocationDate: Date?, signedDate: Date,
            recordedAt: Date? = nil, isUpgraded: Bool? = nil
        ) {
            self.isUpgraded = isUpgraded
            self.recordedAt = recordedAt
            self.transactionId = transactionId
            self.productType = productType
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.revocationDate = revocationDate
            self.signedDate = signedDate
        }
    }

    package struct NotificationFacts: Hashable, Sendable {
        package var type: String
        package var subtype: String?
        package var signedDate: Date
        /// When the ledger recorded it (nil: unknown, taken as new).
        package var recordedAt: Date?
        /// The transaction it carries (nil: none, or unknown).
        package var transactionId: String?
        package init(type: String, subtype: String?, signedDate: Date, recordedAt: Date? = nil, transactionId: String? = nil) {
            self.transactionId = transactionId
            self.recordedAt = recordedAt
            self.type = type
            self.subtype = subtype
            self.signedDate = signedDate
        }
    }

    package var originalTransactionId: String
    package var subscription: SubscriptionRecord?
    package var transactions: [TransactionFacts]
    package var notifications: [NotificationFacts]
    /// The account the originalTransactionId belongs to, when pass 2 has asked Apple about it.
    package var accountId: String?
    /// When pass 2 last compared the account with Apple (nil: never), and last did so with its
    /// whole transaction history.
    package var verifiedAt: Date?
    package var transactionsVerifiedAt: Date?

    package init(
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
