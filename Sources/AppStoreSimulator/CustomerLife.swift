import Foundation
import SignedData

/// One purchase of a customer's Apple account, from first purchase to the scenario's present:
/// the events, the notifications they produce and their delivery attempts, and the truth at the
/// end. An auto-renewable subscription lives through renewals, billing trouble, refunds and
/// expiries; a one-time purchase (consumable, non-consumable) is bought once and maybe refunded.
struct CustomerLife {
    var notifications: [Scenario.Notification] = []
    var customer: Scenario.Customer

    /// Apple retries a failed production delivery 1, 12, 24, 48 and 72 hours after the previous attempt.
    static let retryDelays: [Int64] = [1, 12, 24, 48, 72].map { Int64($0) * 3_600_000 }
    static let failureResults = [
        "TIMED_OUT", "NO_RESPONSE", "SOCKET_ISSUE", "UNSUCCESSFUL_HTTP_RESPONSE_CODE", "TLS_ISSUE", "PREMATURE_CLOSE",
    ]

    /// What one purchase of the account is.
    struct Kind {
        /// Added to the account's base ID: the purchase's originalTransactionId.
        var idOffset: Int64
        var productSuffix: String
        var group: String?
        var ownership: String
        var type: ProductType
        /// Salt of the notifications' UUID seeds, distinct per purchase of an account.
        var uuidSalt: UInt64

        static let main = Kind(idOffset: 0, productSuffix: ".monthly", group: "21000001", ownership: "PURCHASED", type: .autoRenewable, uuidSalt: 0)
    }

    /// The first ID of an account's purchases: Production and Sandbox issue different IDs.
    static func baseId(_ index: Int, environment: AppStoreEnvironment) -> Int64 {
        (environment == .production ? 2_000_000_000_000_000 : 1_000_000_000_000_000) + Int64(index) * 1000
    }

    static func generate(customer index: Int, kind: Kind = .main, configuration: Scenario.Configuration, random: inout SeededGenerator) -> CustomerLife {
        var builder = Builder(index: index, kind: kind, configuration: configuration)
        if kind.type == .autoRenewable { builder.live(random: &random) } else { builder.buyOnce(random: &random) }
        return builder.finish(random: &random)
    }

    struct Builder {
        let index: Int
        let kind: Kind
        let configuration: Scenario.Configuration
        let now: Int64
        let period: Int64
        let originalTransactionId: String
        let productId: String
        var transactionCount = 0
        var versions: [Scenario.TransactionVersion] = []
        var current: TransactionPayload
        var renewal: RenewalInfoPayload
        var status: SubscriptionStatus = .active
        var pending: [(type: NotificationType, subtype: NotificationSubtype?, date: Int64, transaction: TransactionPayload, renewal: RenewalInfoPayload?, status: SubscriptionStatus?)] = []

        init(index: Int, kind: Kind, configuration: Scenario.Configuration) {
            self.index = index
            self.kind = kind
            self.configuration = configuration
            self.now = Int64(configuration.now.timeIntervalSince1970 * 1000)
            self.period = Int64(configuration.period * 1000)
            self.originalTransactionId = String(CustomerLife.baseId(index, environment: configuration.environment) + kind.idOffset)
            self.productId = configuration.bundleId + kind.productSuffix
            self.current = TransactionPayload(transactionId: originalTransactionId, originalTransactionId: originalTransactionId)
            self.renewal = RenewalInfoPayload(originalTransactionId: originalTransactionId)
        }

        /// A new transaction of the purchase, of `product` (the purchase's own unless told) lasting
        /// `duration` (one period unless told).
        /// `chargedAt`: when Apple charged it, before `date` for a renewal charged early (the
        /// transaction is signed then; its period still starts at `date`).
        mutating func purchase(at date: Int64, reason: String, product: String? = nil, duration: Int64? = nil, chargedAt: Int64? = nil) {
            let productId = product ?? self.productId
            var transaction = TransactionPayload(
                transactionId: transactionCount == 0 ? originalTransactionId : String(Int64(originalTransactionId)! + Int64(transactionCount)),
                originalTransactionId: originalTransactionId
            )
            transactionCount += 1
            transaction.webOrderLineItemId = String(3_000_000_000_000_000 + Int64(index) * 1000 + Int64(transactionCount))
            transaction.bundleId = configuration.bundleId
            transaction.productId = productId
            transaction.subscriptionGroupIdentifier = kind.group
            transaction.purchaseDate = date
            transaction.originalPurchaseDate = versions.first?.transaction.purchaseDate ?? date
            transaction.expiresDate = kind.type == .autoRenewable ? date + (duration ?? period) : nil
            transaction.quantity = 1
            transaction.type = kind.type
            transaction.inAppOwnershipType = kind.ownership
            transaction.environment = configuration.environment
            transaction.transactionReason = reason
            transaction.storefront = "USA"
            transaction.storefrontId = "143441"
            transaction.price = 4990
            transaction.currency = "USD"
            // The app's own UUID for its user, set at purchase by three apps in four; a purchase
            // shared through Family Sharing carries none (it is not the member's own).
            transaction.appAccountToken = kind.ownership == "PURCHASED" && index % 4 != 3 ? Self.appAccountToken(index) : nil
            // An introductory offer on one first subscription purchase in three: a free week.
            let introductory = kind.type == .autoRenewable && transactionCount == 1 && index % 3 == 0
            transaction.offerType = introductory ? 1 : nil
            transaction.offerDiscountType = introductory ? "FREE_TRIAL" : nil
            transaction.offerPeriod = introductory ? "P1W" : nil
            // A free trial is charged nothing: Apple's price is 0 (its currency still given).
            if introductory { transaction.price = 0 }
            // The app download's transaction: one per account.
            transaction.appTransactionId = Self.appTransactionId(index, environment: configuration.environment)
            // The main subscription of one account in 37 is one Apple migrated (Advanced
            // Commerce): its transactions name the originalTransactionId it had before.
            transaction.previousOriginalTransactionId = Self.migrated(index: index, kind: kind) ? Self.previousOriginalTransactionId(of: originalTransactionId) : nil
            transaction.signedDate = chargedAt ?? date
            current = transaction
            versions.append(Scenario.TransactionVersion(modified: chargedAt ?? date, transaction: transaction))
            renewal.productId = productId
            renewal.autoRenewProductId = productId
            renewal.autoRenewStatus = 1
            renewal.expirationIntent = nil
            renewal.isInBillingRetryPeriod = false
            renewal.gracePeriodExpiresDate = nil
            renewal.renewalDate = date + (duration ?? period)
            renewal.recentSubscriptionStartDate = transaction.originalPurchaseDate
            renewal.environment = configuration.environment
            renewal.renewalPrice = 4990
            renewal.currency = "USD"
            renewal.appAccountToken = transaction.appAccountToken
            renewal.appTransactionId = transaction.appTransactionId
            renewal.eligibleWinBackOfferIds = nil
        }

        static func appTransactionId(_ index: Int, environment: AppStoreEnvironment) -> String {
            String((environment == .production ? 7_000_000_000_000_000 : 6_000_000_000_000_000) + Int64(index))
        }

        static func migrated(index: Int, kind: Kind) -> Bool {
            kind.idOffset == Kind.main.idOffset && index % 37 == 5
        }

        /// The ID a migrated subscription had before: an earlier purchase of the account, outside the history.
        static func previousOriginalTransactionId(of original: String) -> String {
            String(Int64(original)! + 900)
        }

        /// A deterministic UUID for the account's user in the app.
        static func appAccountToken(_ index: Int) -> String {
            "7a1e0000-0000-4000-8000-" + String(String(index, radix: 16).suffix(12)).leftPadded(to: 12)
        }

        /// A notification about the current transaction, or about `other` (a refund request about
        /// an earlier one).
        mutating func emit(_ type: NotificationType, _ subtype: NotificationSubtype?, at date: Int64, about other: TransactionPayload? = nil) {
            guard date <= now else { return }
            var transaction = other ?? current
            transaction.signedDate = date
            guard kind.type == .autoRenewable else {
                // One-time purchases carry no renewal info and no status.
                pending.append((type, subtype, date, transaction, nil, nil))
                return
            }
            var renewalInfo = renewal
            renewalInfo.signedDate = date
            pending.append((type, subtype, date, transaction, renewalInfo, status))
        }

        /// Apple signing the billing failure hours after the recovery that ended it (developer
        /// forum thread 745515: a DID_FAIL_TO_RENEW 7.5 hours after the DID_RENEW, the subscription
        /// still active): for the accounts `Configuration.lateFailuresAfterRecovery` names, a
        /// DID_FAIL_TO_RENEW signed 7.5 hours after `recovered`, carrying the failed period's
        /// transaction and renewal info and status 3. The truth stays the recovery's.
        mutating func signFailureLate(_ failed: (transaction: TransactionPayload, renewal: RenewalInfoPayload), after recovered: Int64) {
            guard kind.uuidSalt == Kind.main.uuidSalt, configuration.lateFailuresAfterRecovery.contains(index) else { return }
            let late = recovered + 27_000_000
            guard late <= now, late < recovered + period else { return }
            var transaction = failed.transaction
            transaction.signedDate = late
            var renewalInfo = failed.renewal
            renewalInfo.signedDate = late
            pending.append((.didFailToRenew, nil, late, transaction, renewalInfo, .billingRetry))
        }

        /// The subscription's current transaction revoked at `date` (a refund, or a Family Sharing
        /// member's access withdrawn): a new version of it, status 5, auto-renew off, `notification`.
        mutating func revoke(at date: Int64, type: String, percentage: Int?, notifying notification: NotificationType) {
            current.revocationDate = date
            current.revocationReason = 0
            current.revocationType = type
            current.revocationPercentage = percentage
            current.signedDate = date
            versions.append(Scenario.TransactionVersion(modified: date, transaction: current))
            status = .revoked
            renewal.autoRenewStatus = 0
            emit(notification, nil, at: date)
        }

        /// A refund request: Apple's CONSUMPTION_REQUEST, and while it is undecided a new one (a
        /// new notificationUUID, the same transaction) every `Configuration.consumptionRequestInterval`
        /// (8 hours), as many times as `Configuration.consumptionRequestRepeats` says, none at or
        /// after `decided` (Apple staff, developer forum thread 756151: Apple sends new requests
        /// periodically while one is open). Returns when the last request was sent.
        @discardableResult
        mutating func requestRefund(at date: Int64, decided: Int64? = nil) -> Int64 {
            emit(.consumptionRequest, nil, at: date)
            var last = date
            for number in 0..<configuration.consumptionRequestRepeats {
                let again = date + Int64(number + 1) * Int64(configuration.consumptionRequestInterval * 1000)
                if let decided, again >= decided { break }
                emit(.consumptionRequest, nil, at: again)
                last = again
            }
            return last
        }

        /// A restore of the purchase: a new transaction ID under the same originalTransactionId.
        mutating func restore(at date: Int64) {
            guard date <= now else { return }
            var copy = current
            copy.transactionId = String(Int64(originalTransactionId)! + Int64(transactionCount))
            transactionCount += 1
            copy.purchaseDate = date
            copy.signedDate = date
            versions.append(Scenario.TransactionVersion(modified: date, transaction: copy))
        }

        /// A one-time purchase: bought at a random time of the history, refunded one time in five.
        mutating func buyOnce(random: inout SeededGenerator) {
            let start = now - Int64(configuration.history * 1000)
            let bought = start + Int64.random(in: 0...max(1, Int64(configuration.history * 900)), using: &random)
            purchase(at: bought, reason: "PURCHASE")
            emit(.oneTimeCharge, nil, at: bought)
            guard Int.random(in: 0..<5, using: &random) == 0 else { return }
            let refunded = bought + period / 3
            // One refunded non-consumable in two was restored on another device first: a new
            // transaction of the same purchase, which no notification announces (only Get
            // Transaction History shows it); the refund revokes the purchase.
            if kind.type == .nonConsumable && index % 2 == 0 { restore(at: bought + period / 12) }
            // A refund request first asks the app for consumption information (for any product
            // type since API 1.19).
            emit(.consumptionRequest, nil, at: bought + period / 6)
            guard refunded <= now else { return }
            current.revocationDate = refunded
            current.revocationReason = 1
            current.revocationType = "REFUND_FULL"
            current.revocationPercentage = 100_000
            current.signedDate = refunded
            versions.append(Scenario.TransactionVersion(modified: refunded, transaction: current))
            emit(.refund, nil, at: refunded)
        }

        /// The main subscription of one account in 29 starts on the annual plan and upgrades.
        static func upgrades(index: Int, kind: Kind) -> Bool {
            kind.idOffset == Kind.main.idOffset && index % 29 == 11
        }

        /// An annual plan (12 periods) upgraded to the monthly one, a higher level of the same
        /// group, 1.5 periods in. The upgrade takes effect at once (DID_CHANGE_RENEWAL_PREF,
        /// UPGRADE, carrying the new transaction) and Apple marks the annual transaction
        /// `isUpgraded`; its expiry stays the annual one, later than the monthly's. A quarter period
        /// later the customer asks for a refund of the annual plan: CONSUMPTION_REQUEST, then
        /// REFUND_DECLINED, both carrying the upgraded-from transaction. Returns when the monthly
        /// plan comes up for renewal, nil when the present comes first.
        mutating func upgradeFromAnnual(first: Int64) -> Int64? {
            purchase(at: first, reason: "PURCHASE", product: configuration.bundleId + ".annual", duration: 12 * period)
            emit(.subscribed, .initialBuy, at: first)
            let upgraded = first + period + period / 2
            guard upgraded <= now else { return nil }
            var annual = current
            annual.isUpgraded = true
            annual.signedDate = upgraded
            versions.append(Scenario.TransactionVersion(modified: upgraded, transaction: annual))
            purchase(at: upgraded, reason: "PURCHASE")
            emit(.didChangeRenewalPref, .upgrade, at: upgraded)
            emit(.consumptionRequest, nil, at: upgraded + period / 4, about: annual)
            // Decided before anything the new plan's own life can bring (its refund comes at a
            // third of its period at the earliest): two notifications of one subscription signed
            // in the same millisecond would leave the latest state undefined.
            emit(.refundDeclined, nil, at: upgraded + period / 3 - period / 48, about: annual)
            return upgraded + period
        }

        mutating func live(random: inout SeededGenerator) {
            let start = now - Int64(configuration.history * 1000)
            let first = start + Int64.random(in: 0...max(1, Int64(configuration.history * 500)), using: &random)
            var expires: Int64
            if Self.upgrades(index: index, kind: kind) {
                guard let renewal = upgradeFromAnnual(first: first) else { return }
                expires = renewal
            } else {
                purchase(at: first, reason: "PURCHASE")
                emit(.subscribed, .initialBuy, at: first)
                expires = first + period
            }
            while expires - renewalLead() <= now {
                // Above the renewal share, the other fates keep their relative sizes.
                let draw = Double.random(in: 0..<1, using: &random)
                let renewalShare = configuration.renewalShare
                let fate = draw < renewalShare ? 0 : 0.70 + (draw - renewalShare) / max(1 - renewalShare, 0.000_001) * 0.30
                let charged = expires - renewalLead()
                if fate < 0.70 {
                    purchase(at: expires, reason: "RENEWAL", chargedAt: charged)
                    emit(.didRenew, nil, at: charged)
                } else if expires > now {
                    // Charged early or not at all: every other fate happens at the expiry, still ahead.
                    return
                } else if fate < 0.76 {
                    renewal.autoRenewStatus = 0
                    emit(.didChangeRenewalStatus, .autoRenewDisabled, at: expires - period / 2)
                    status = .expired
                    renewal.expirationIntent = 1
                    // A customer who left of their own accord may be won back.
                    renewal.eligibleWinBackOfferIds = [configuration.bundleId + ".winback.monthly", configuration.bundleId + ".winback.annual"]
                    emit(.expired, .voluntary, at: expires)
                    let back = expires + 2 * period
                    guard configuration.winBacks, index % 4 == 1, back <= now else { return }
                    status = .active
                    purchase(at: back, reason: "PURCHASE")
                    emit(.subscribed, .resubscribe, at: back)
                    expires = back + period
                    continue
                } else if fate < 0.82 {
                    guard let recovered = failToRenew(expires: expires, random: &random) else { return }
                    expires = recovered
                    continue
                } else if fate < 0.86 {
                    refund(expires: expires)
                    return
                } else if fate < 0.89 {
                    emit(.priceIncrease, .pending, at: expires - period / 3)
                    status = .expired
                    renewal.autoRenewStatus = 0
                    renewal.expirationIntent = 3
                    emit(.expired, .priceIncrease, at: expires)
                    return
                } else if fate < 0.91 {
                    status = .expired
                    renewal.expirationIntent = 4
                    emit(.expired, .productNotForSale, at: expires)
                    return
                } else if fate < 0.94 {
                    status = .expired
                    renewal.expirationIntent = 5
                    emit(.expired, nil, at: expires)
                    return
                } else {
                    renewal.autoRenewProductId = configuration.bundleId + ".monthly.lite"
                    emit(.didChangeRenewalPref, .downgrade, at: expires - period / 2)
                    renewal.autoRenewProductId = productId
                    purchase(at: expires, reason: "RENEWAL", chargedAt: charged)
                    emit(.didRenew, nil, at: charged)
                }
                expires += period
            }
        }

        /// How long before the current period ends Apple charges its renewal
        /// (`Configuration.renewalLead`): a draw of its own, so that the world's fates do not move.
        func renewalLead() -> Int64 {
            let most = min(Int64(configuration.renewalLead * 1000), period / 4)
            guard most > 0 else { return 0 }
            // Seeded by the purchase's count of transactions, not by the time: the same world at any present.
            var generator = SeededGenerator(seed: configuration.seed &* 0x2545_F491_4F6C_DD1D &+ UInt64(index) &* 104_729 &+ kind.uuidSalt &* 31 &+ UInt64(transactionCount))
            return Int64.random(in: 0...most, using: &generator)
        }

        /// A renewal that fails at `expires`, in grace or in billing retry; half recover a
        /// quarter period later (the next expiry returned), the others expire (nil: life ends).
        mutating func failToRenew(expires: Int64, random: inout SeededGenerator) -> Int64? {
            let grace = Bool.random(using: &random)
            status = grace ? .billingGracePeriod : .billingRetry
            renewal.isInBillingRetryPeriod = true
            renewal.expirationIntent = 2
            if grace { renewal.gracePeriodExpiresDate = expires + period / 8 }
            emit(.didFailToRenew, grace ? .gracePeriod : nil, at: expires)
            if Bool.random(using: &random) {
                let recovered = expires + period / 4
                // What has not happened yet changes nothing: the truth stays at the failure.
                guard recovered <= now else { return nil }
                status = .active
                let failed = (transaction: current, renewal: renewal)
                purchase(at: recovered, reason: "RENEWAL")
                emit(.didRenew, .billingRecovery, at: recovered)
                signFailureLate(failed, after: recovered)
                return recovered + period
            }
            guard expires + period / 2 <= now else { return nil }
            status = .expired
            emit(.expired, .billingRetry, at: expires + period / 2)
            return nil
        }

        /// The period ending at `expires` refunded a third of the way in, after the customer's
        /// request (and an earlier one declined, where configured); a family member's access
        /// revoked instead, where configured. Life ends.
        mutating func refund(expires: Int64) {
            var refundDate = (current.purchaseDate ?? expires) + period / 3
            if configuration.familySharingRevocations && kind.ownership == "FAMILY_SHARED" {
                // The purchaser stopped sharing: the member's access is revoked, nothing
                // is refunded to them, and no refund request precedes it.
                guard refundDate <= now else { return }
                revoke(at: refundDate, type: "FAMILY_REVOKE", percentage: nil, notifying: .revoke)
                return
            }
            if configuration.refundsDeclinedFirst {
                // An earlier request Apple declined: a new request follows it.
                requestRefund(at: refundDate - period / 3, decided: refundDate - period / 4)
                emit(.refundDeclined, nil, at: refundDate - period / 4)
            }
            // The customer's refund request: Apple asks for consumption information first, and
            // again while it decides; the refund comes a sixth of a period after the last request.
            let asked = refundDate - period / 6
            refundDate = requestRefund(at: asked) + period / 6
            guard refundDate <= now else { return }
            if configuration.fullRefunds {
                revoke(at: refundDate, type: "REFUND_FULL", percentage: 100_000, notifying: .refund)
            } else {
                revoke(at: refundDate, type: "REFUND_PRORATED", percentage: 66_667, notifying: .refund)
            }
        }

        mutating func finish(random: inout SeededGenerator) -> CustomerLife {
            let outage = configuration.outage.map {
                Int64($0.lowerBound.timeIntervalSince1970 * 1000)..<Int64($0.upperBound.timeIntervalSince1970 * 1000)
            }
            var notifications: [Scenario.Notification] = []
            for (offset, event) in pending.enumerated() {
                var uuidGenerator = SeededGenerator(
                    seed: configuration.seed &* 1_000_003 &+ UInt64(index) &* 7919 &+ UInt64(offset) &+ kind.uuidSalt &* 0x9E37_79B9
                )
                let uuid = Self.uuid(&uuidGenerator)
                var attempts: [Scenario.SendAttemptRecord] = []
                var attempt = event.date + 2_000
                var retries = configuration.environment == .production ? CustomerLife.retryDelays[...] : []
                while attempt <= now {
                    if let outage, outage.contains(attempt) {
                        attempts.append(.init(date: attempt, result: CustomerLife.failureResults.randomElement(using: &random)!))
                        guard let delay = retries.popFirst() else { break }
                        attempt += delay
                    } else {
                        attempts.append(.init(date: attempt, result: "SUCCESS"))
                        break
                    }
                }
                // A silenced event happened (the truth has it) but left no notification at all. It
                // is dropped only now, after its random draws, so that silencing one notification
                // leaves the rest of the world exactly as it was.
                if configuration.silencedNotifications.contains(uuid) { continue }
                // A type Apple stopped sending for a while: likewise dropped after its draws.
                if let paused = configuration.unsentTypes[event.type], paused.contains(Date(timeIntervalSince1970: Double(event.date) / 1000)) { continue }
                var notification = Scenario.Notification(
                    uuid: uuid, type: event.type, subtype: event.subtype, signedDate: event.date,
                    customer: index, originalTransactionId: originalTransactionId, transaction: event.transaction,
                    renewalInfo: event.renewal, status: event.status, sendAttempts: attempts
                )
                notification.lostSilently = attempts.last?.result == "SUCCESS" && Scenario.Notification.isLost(uuid: uuid, share: configuration.silentLossShare)
                notifications.append(notification)
            }
            var latest = current
            latest.signedDate = now
            let isSubscription = kind.type == .autoRenewable
            let customer = Scenario.Customer(
                index: index, originalTransactionId: originalTransactionId, transactionVersions: versions,
                subscriptionStatus: isSubscription ? status : nil, latestTransaction: latest, renewalInfo: isSubscription ? renewal : nil,
                purchases: []
            )
            return CustomerLife(notifications: notifications, customer: customer)
        }

        static func uuid(_ generator: inout SeededGenerator) -> String {
            var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            let hex = bytes.map { String(format: "%02x", $0) }.joined()
            let characters = Array(hex)
            return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
        }
    }
}

extension String {
    /// Zeros in front, to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
