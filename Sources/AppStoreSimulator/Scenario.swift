package import Foundation
package import SignedData

/// A simulated App Store world: customers whose subscriptions and one-time purchases evolve
/// through events, each event a notification Apple signs, and an outage during which deliveries
/// to the app's server failed. Generated from a seed, so the same configuration always yields
/// the same world. Holds compact records, never signed payloads: those are signed when served.
package struct Scenario: Sendable {
    package struct Configuration: Sendable {
        package var seed: UInt64 = 1
        package var customers: Int = 100
        package var environment: AppStoreEnvironment = .production
        package var bundleId: String = "com.example.simulated"
        package var appAppleId: Int64 = 1_234_567_890
        /// The scenario's present; everything happened before it.
        package var now: Date = Date()
        /// How far back the first subscriptions start.
        package var history: TimeInterval = 7 * 86_400
        /// The length of one subscription period (sandbox-style: short).
        package var period: TimeInterval = 86_400
        /// How long before a period ends Apple charges its renewal, at most: "During the 24-hour
        /// period before the subscription expires, the App Store starts trying to automatically
        /// renew it". Each renewal is charged (its transaction signed, DID_RENEW sent) a
        /// deterministic draw of 0…this before the old expiry, never more than a quarter period
        /// (the short sandbox-style periods); the new period still starts at the old expiry
        /// (periods stay contiguous). 0: renewals charged exactly at the old expiry. On by
        /// default (issue 62, point 9): a world where Apple renews at the old expiry hid the
        /// compensation of subscribers who were never locked out.
        package var renewalLead: TimeInterval = 86_400
        /// Deliveries attempted in here failed.
        package var outage: Range<Date>?
        /// Share of the notifications delivered outside the outage that a proxy answered 200
        /// without passing them on (issue 64, point 5): Apple recorded the attempt as SUCCESS (its
        /// history and its failures-only query say so, `detect-outage` sees nothing), and the live
        /// server never received them. Chosen by a hash of each notification's UUID, no random
        /// draw: the rest of the world is the one the same seed makes without losses.
        package var silentLossShare: Double = 0
        /// Types Apple stopped sending for a while (issue 64, point 5; developers have seen
        /// EXPIRED stop arriving for days): the event happened and the truth has it, but a
        /// notification of the type signed in the range was neither delivered nor kept in Apple's
        /// history. Only what Apple owes (`overdue`) and its answers for the account reveal it.
        package var unsentTypes: [NotificationType: Range<Date>] = [:]
        /// Chance that a period ends in a plain renewal; the rest is split among voluntary
        /// expiry, billing trouble, refunds, price increases, withdrawn products and downgrades.
        package var renewalShare: Double = 0.70
        /// Notifications (by UUID) that Apple never produced: the event happened, the truth has
        /// it, but neither the webhook nor the history ever saw it (an expiry never notified, a
        /// renewal older than what history keeps). Only Get Transaction History reveals them.
        package var silencedNotifications: Set<String> = []
        /// Share of accounts that also hold a subscription in a second subscription group
        /// (a third of them shared with the account through Family Sharing, `FAMILY_SHARED`).
        package var secondSubscriptionShare: Double = 0.25
        /// Share of accounts that also bought one-time purchases (a consumable, a non-consumable),
        /// each refunded one time in five.
        package var oneTimePurchaseShare: Double = 0.3
        /// Notifications of a type Apple added after this release (`Scenario.typeAddedLater`),
        /// placed in the outage: Apple adds types every year, and a recovery must not miss them.
        /// Each is a copy of a missed notification's snapshot (so the truth is unchanged) under a
        /// new UUID and the new type, signed a millisecond later.
        package var typeAddedLaterNotifications = 0
        /// Set App Account Token calls (by customer index: the new token), made an hour before
        /// the present on the account's main purchase: every transaction of it, its latest and
        /// its renewal info carry the new token from then on, and no notification says so (the
        /// notifications already sent keep the old one).
        package var appAccountTokensSet: [Int: String] = [:]
        /// Accounts (by customer index) whose billing recoveries Apple follows with the billing
        /// failure signed 7.5 hours late, out of order (`CustomerLife.Builder.signFailureLate`).
        package var lateFailuresAfterRecovery: Set<Int> = []
        /// Accounts (by customer index) whose main subscription was sold through the Advanced
        /// Commerce API: each of its transactions, in every answer and notification, carries
        /// `advancedCommerceInfo`, and Send Consumption Information refuses answers about them.
        package var advancedCommerceCustomers: Set<Int> = []
        /// Accounts (by customer index) whose main subscription is a seat assigned to them in a
        /// multiseat group subscription (`inAppOwnershipType` ASSIGNED, App Store Server API
        /// 1.22): Apple refuses to extend it (4030028) and takes no consumption answer about it (4000227).
        package var assignedCustomers: Set<Int> = []
        /// How many more CONSUMPTION_REQUESTs Apple sends for a refund request while it is
        /// undecided, `consumptionRequestInterval` apart, each with a notificationUUID of its own
        /// (the refund then comes later: Apple decides after the last).
        package var consumptionRequestRepeats = 0
        /// How far apart: developers report about 8 hours (endpoints-that-change §9).
        package var consumptionRequestInterval: TimeInterval = 8 * 3600
        /// Each refunded subscription's customer asked once before, and Apple declined
        /// (REFUND_DECLINED) before the request that led to the refund.
        package var refundsDeclinedFirst = false
        /// A Family Sharing member's subscription that would be refunded is revoked instead (the
        /// purchaser stopped sharing): REVOKE, `revocationType` FAMILY_REVOKE, nothing refunded.
        package var familySharingRevocations = false
        /// Refunds are whole (`REFUND_FULL`, 100%) rather than prorated (`REFUND_PRORATED`, 66.667%).
        package var fullRefunds = false
        /// One customer in four who let a subscription expire of their own accord subscribes
        /// again two periods later (SUBSCRIBED, RESUBSCRIBE: a new transaction, reason PURCHASE,
        /// under the same originalTransactionId) and lives on. Off by default: the worlds of
        /// other tests stay as they are.
        package var winBacks = false

        package init() {}
    }

    /// One notification as the world recorded it.
    package struct Notification: Sendable, Hashable {
        package var uuid: String
        package var type: NotificationType
        package var subtype: NotificationSubtype?
        package var signedDate: UnixMilliseconds
        package var customer: Int
        package var originalTransactionId: String
        /// The transaction and renewal info as of `signedDate`.
        package var transaction: TransactionPayload
        package var renewalInfo: RenewalInfoPayload?
        package var status: SubscriptionStatus?
        /// Delivery attempts made before the scenario's present.
        package var sendAttempts: [SendAttemptRecord]
        /// A CONSUMPTION_REQUEST Apple sends again for an unanswered refund request: the first
        /// request's UUID. Apple does not send it once an answer or a decision came before it.
        package var repeatOf: String? = nil
        /// RENEWAL_EXTENSION/SUMMARY: the mass extension's counts, signed in place of `data`
        /// (`transaction` is then empty and `customer` -1).
        package var summary: RenewalExtensionSummary? = nil

        /// Apple's attempt succeeded (a 200), but what answered did not pass it on (`silentLossShare`).
        package var lostSilently = false

        /// Whether a live server received it (some attempt succeeded, and it was not lost silently).
        package var delivered: Bool { !lostSilently && sendAttempts.contains { $0.result == "SUCCESS" } }

        /// Whether a proxy losing this share of deliveries loses this one: a fraction of its
        /// UUID's FNV-1a hash, so the choice needs no random draw.
        static func isLost(uuid: String, share: Double) -> Bool {
            guard share > 0 else { return false }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in uuid.utf8 {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01b3
            }
            return Double(hash >> 11) / Double(UInt64(1) << 53) < share
        }
    }

    package struct SendAttemptRecord: Sendable, Hashable {
        package var date: UnixMilliseconds
        package var result: String
    }

    /// A transaction's versions: it changes when refunded, and moves to the end of the history.
    package struct TransactionVersion: Sendable, Hashable {
        package var modified: UnixMilliseconds
        package var transaction: TransactionPayload
    }

    /// One purchase's truth now: a subscription (status, latest transaction, renewal info) or
    /// a one-time purchase (no status, no renewal info).
    package struct Purchase: Sendable, Hashable {
        package var originalTransactionId: String
        package var subscriptionStatus: SubscriptionStatus?
        package var latestTransaction: TransactionPayload
        package var renewalInfo: RenewalInfoPayload?
    }

    /// A customer's Apple Account in the app: its main subscription (the fields below, for
    /// readers that look at one subscription), and every purchase it holds. Get Transaction
    /// History and Get All Subscription Statuses answer for the whole account.
    package struct Customer: Sendable, Hashable {
        package var index: Int
        /// The main subscription's originalTransactionId.
        package var originalTransactionId: String
        /// Every transaction of the account, each version (a refund makes a new one).
        package var transactionVersions: [TransactionVersion]
        /// The main subscription's truth now.
        package var subscriptionStatus: SubscriptionStatus?
        package var latestTransaction: TransactionPayload
        package var renewalInfo: RenewalInfoPayload?
        /// Every purchase of the account, the main subscription first.
        package var purchases: [Purchase]

        /// The account's auto-renewable subscriptions.
        package var subscriptions: [Purchase] { purchases.filter { $0.latestTransaction.type == .autoRenewable } }
    }

    package let configuration: Configuration
    /// Every notification, oldest first (by signedDate, then UUID).
    package let notifications: [Notification]
    package let customers: [Customer]
    private let customerByTransaction: [String: Int]

    package init(_ configuration: Configuration) {
        self.configuration = configuration
        var random = SeededGenerator(seed: configuration.seed)
        var notifications: [Notification] = []
        var customers: [Customer] = []
        var index: [String: Int] = [:]
        for customer in 0..<configuration.customers {
            var life = CustomerLife.generate(customer: customer, configuration: configuration, random: &random)
            if configuration.advancedCommerceCustomers.contains(customer) { Self.soldThroughAdvancedCommerce(&life) }
            if configuration.assignedCustomers.contains(customer) { Self.assigned(&life) }
            var account = life.customer
            account.purchases = [Purchase(life.customer)]
            notifications += life.notifications
            // The account's other purchases draw from a generator of their own, so that the main
            // subscriptions' world is the same whatever else the accounts hold.
            var extra = SeededGenerator(seed: configuration.seed &* 0x5851_F42D_4C95_7F2D &+ UInt64(customer) &+ 1)
            for kind in Self.otherPurchases(configuration, random: &extra) {
                let other = CustomerLife.generate(customer: customer, kind: kind, configuration: configuration, random: &extra)
                notifications += other.notifications
                account.transactionVersions += other.customer.transactionVersions
                account.purchases.append(Purchase(other.customer))
            }
            if let token = configuration.appAccountTokensSet[customer] { Self.setAppAccountToken(token, on: &account, configuration: configuration) }
            customers.append(account)
            for version in account.transactionVersions {
                index[version.transaction.transactionId!] = customer
            }
        }
        notifications += Self.typeAddedLater(configuration, copying: notifications)
        notifications.sort { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        self.notifications = notifications
        self.customers = customers
        self.customerByTransaction = index
    }

    /// The purchases an account holds beside its main subscription.
    static func otherPurchases(_ configuration: Configuration, random: inout SeededGenerator) -> [CustomerLife.Kind] {
        var kinds: [CustomerLife.Kind] = []
        if Double.random(in: 0..<1, using: &random) < configuration.secondSubscriptionShare {
            let shared = Int.random(in: 0..<3, using: &random) == 0
            kinds.append(
                .init(
                    idOffset: 500, productSuffix: shared ? ".family.monthly" : ".addon.monthly", group: "21000002",
                    ownership: shared ? "FAMILY_SHARED" : "PURCHASED", type: .autoRenewable, uuidSalt: 1
                )
            )
        }
        if Double.random(in: 0..<1, using: &random) < configuration.oneTimePurchaseShare {
            kinds.append(.init(idOffset: 900, productSuffix: ".coins100", group: nil, ownership: "PURCHASED", type: .consumable, uuidSalt: 2))
            if Bool.random(using: &random) {
                kinds.append(.init(idOffset: 950, productSuffix: ".lifetime", group: nil, ownership: "PURCHASED", type: .nonConsumable, uuidSalt: 3))
            }
        }
        return kinds
    }

    /// A notification type Apple added after this release of the tool: the simulated App Store
    /// knows it (history filters by it, notifications carry it), the tool's list does not.
    package static let typeAddedLater = NotificationType(rawValue: "SIMULATED_TYPE_ADDED_LATER")

    /// Every type the simulated App Store knows: Apple's documented list, and the one added later.
    package static let knownTypes = NotificationType.documented + [typeAddedLater]

    static func typeAddedLater(_ configuration: Configuration, copying notifications: [Notification]) -> [Notification] {
        guard configuration.typeAddedLaterNotifications > 0 else { return [] }
        let missed = notifications.filter { !$0.delivered && $0.renewalInfo != nil }.sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        guard !missed.isEmpty else { return [] }
        let step = max(1, missed.count / configuration.typeAddedLaterNotifications)
        return (0..<min(configuration.typeAddedLaterNotifications, missed.count)).map { index in
            var copy = missed[index * step]
            var generator = SeededGenerator(seed: configuration.seed &* 0x2545_F491_4F6C_DD1D &+ UInt64(index) &+ 77)
            copy.uuid = CustomerLife.Builder.uuid(&generator)
            copy.type = typeAddedLater
            copy.subtype = nil
            copy.signedDate += 1
            copy.transaction.signedDate = copy.signedDate
            copy.renewalInfo?.signedDate = copy.signedDate
            return copy
        }
    }

    /// What an Advanced Commerce API sale adds to each transaction (Apple's `advancedCommerceInfo`:
    /// the request's reference, the tax code, the period; the shape is loosely documented).
    static let advancedCommerceInfo: JSONValue = .object([
        "requestReferenceId": .string("6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"), "taxCode": .string("C003-00-2"), "period": .string("P1M"),
    ])

    static func soldThroughAdvancedCommerce(_ life: inout CustomerLife) {
        everyTransaction(of: &life) { $0.advancedCommerceInfo = advancedCommerceInfo }
    }

    static func assigned(_ life: inout CustomerLife) {
        everyTransaction(of: &life) { $0.inAppOwnershipType = "ASSIGNED" }
    }

    /// `edit` applied to every version of the main purchase's transactions, its latest, and the
    /// transaction each of its notifications carries: what the purchase is, not what happened to it.
    static func everyTransaction(of life: inout CustomerLife, _ edit: (inout TransactionPayload) -> Void) {
        for index in life.customer.transactionVersions.indices { edit(&life.customer.transactionVersions[index].transaction) }
        edit(&life.customer.latestTransaction)
        for index in life.notifications.indices { edit(&life.notifications[index].transaction) }
    }

    /// Set App Account Token on the account's main purchase: a new version of each of its
    /// transactions, modified at the call.
    static func setAppAccountToken(_ token: String, on account: inout Customer, configuration: Configuration) {
        let at = Int64(configuration.now.addingTimeInterval(-3600).timeIntervalSince1970 * 1000)
        var newest: [String: TransactionPayload] = [:]
        var order: [String] = []
        for version in account.transactionVersions where version.transaction.originalTransactionId == account.originalTransactionId {
            let id = version.transaction.transactionId!
            if newest[id] == nil { order.append(id) }
            newest[id] = version.transaction
        }
        for id in order {
            var changed = newest[id]!
            changed.appAccountToken = token
            changed.signedDate = at
            account.transactionVersions.append(TransactionVersion(modified: at, transaction: changed))
        }
        account.latestTransaction.appAccountToken = token
        account.renewalInfo?.appAccountToken = token
        account.purchases[0].latestTransaction.appAccountToken = token
        account.purchases[0].renewalInfo?.appAccountToken = token
    }

    /// The customer a transaction ID (original or not) belongs to.
    package func customer(forTransactionId id: String) -> Customer? {
        customerByTransaction[id].map { customers[$0] }
    }

    /// Notifications a live server would have received (the ledger before the reconciler runs).
    package var deliveredNotifications: [Notification] { notifications.filter(\.delivered) }

    /// Notifications whose every delivery attempt failed: what the reconciler must recover.
    package var missedNotifications: [Notification] { notifications.filter { !$0.delivered } }

    package var nowMilliseconds: UnixMilliseconds { Int64(configuration.now.timeIntervalSince1970 * 1000) }
}

/// A small deterministic generator (SplitMix64), so a seed always yields the same scenario.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Scenario {
    /// Notifications whose absence only Get Transaction History can reveal, to silence in a
    /// scenario built from the same configuration: a refund of a customer who also has a missed
    /// notification (so the recovery touches them), a plain renewal followed by another (so its
    /// transaction is missing from the chain), and an expiry more than two hours ago after which
    /// the record would stay active. Each is nil when the world has no such notification.
    package func notificationsOnlyTransactionHistoryReveals() -> (refund: Notification?, renewal: Notification?, expiry: Notification?) {
        let missed = missedNotifications
        let refund = notifications.first { candidate in
            candidate.type == .refund && candidate.transaction.type == .autoRenewable
                && missed.contains { $0.originalTransactionId == candidate.originalTransactionId && $0.uuid != candidate.uuid }
        }
        let renewal = notifications.first { candidate in
            candidate.type == .didRenew && candidate.subtype == nil && candidate.customer != refund?.customer
                && notifications.contains {
                    $0.originalTransactionId == candidate.originalTransactionId && $0.type == .didRenew && $0.signedDate > candidate.signedDate
                }
        }
        let expiry = notifications.first { candidate in
            candidate.type == .expired && [nil, .productNotForSale, .priceIncrease, .voluntary].contains(candidate.subtype)
                && candidate.signedDate < nowMilliseconds - 2 * 3_600_000 && candidate.customer != refund?.customer
                && candidate.customer != renewal?.customer
        }
        return (refund, renewal, expiry)
    }
}

extension Scenario.Purchase {
    init(_ life: Scenario.Customer) {
        self.init(
            originalTransactionId: life.originalTransactionId, subscriptionStatus: life.subscriptionStatus,
            latestTransaction: life.latestTransaction, renewalInfo: life.renewalInfo
        )
    }
}
