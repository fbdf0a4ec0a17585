import Crypto
import Foundation
import SignedData
import Synchronization

// Extend a Subscription Renewal Date and the mass extension, as Apple documents them
// (endpoints-that-change §3, §4): Apple's validation and codes, at most two extensions of a
// subscription in 365 days, only active paid subscriptions, a family member's share refused, one
// extension per requestIdentifier (a repeat answers as the first did: §8.3 could not confirm
// Apple's answer, and this is what "the same when resending one whose outcome is unknown"
// needs). Each extension moves the subscription's expiry in every later answer (statuses,
// transaction history) and Apple signs a RENEWAL_EXTENDED notification. A mass extension is
// worked through over several status requests; a subscriber it cannot extend (Apple's rules, or
// a passing reason for one in eight) gets RENEWAL_EXTENSION/FAILURE, and a SUMMARY ends it.

extension SimulatedAPI {
    /// An extension Apple made.
    package struct RenewalExtensionTaken: Sendable, Hashable {
        package var originalTransactionId: String
        package var requestIdentifier: String
        package var extendByDays: Int
        package var reasonCode: Int
        package var at: Int64
        /// The new expiry.
        package var effectiveDate: Int64
        package var webOrderLineItemId: String?
        /// The mass extension's requestIdentifier, when it made this one.
        package var mass: String?
    }

    /// A mass extension Apple took, worked through over time: the subscribers it covers (active
    /// when it was requested, in its storefronts), a share of them handled at each status request.
    struct MassExtension: Sendable {
        var productId: String
        var requestIdentifier: String
        var days: Int
        var reason: Int
        /// The subscriptions still to handle, by originalTransactionId, in order.
        var waiting: [String]
        /// How many each status request handles (a third of the subscribers, at least one).
        var batch: Int
        var statusRequests = 0
        var succeeded: Int64 = 0
        var failed: Int64 = 0
        var completeDate: Int64?
    }

    /// One subscriber in `massFailureShare` fails a mass extension for a passing reason: Apple
    /// documents that some do ("for each RENEWAL_EXTENSION notification with subtype FAILURE …
    /// call Extend a Subscription Renewal Date") without saying why; a single extension of the
    /// same subscription succeeds. Deterministic by the subscription and the request.
    static let massFailureShare: UInt64 = 8

    static func failsInMass(_ originalTransactionId: String, _ identifier: String) -> Bool {
        let digest = Array(SHA256.hash(data: Data("mass failure \(originalTransactionId) \(identifier)".utf8)))
        return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } % massFailureShare == 0
    }

    /// Every extension made, in order.
    package var renewalExtensions: [RenewalExtensionTaken] { state.withLock { $0.extensions } }

    /// Notifications Apple signed after the world was made (RENEWAL_EXTENDED, a refund
    /// declined…), as a live server would receive them.
    package var notificationsSignedLater: [Scenario.Notification] { state.withLock { $0.signedLater } }

    /// A subscription's expiry now, its extensions included (nil: no such subscription).
    package func expiresDate(ofSubscription originalTransactionId: String) -> Int64? {
        guard let (_, purchase) = subscription(originalTransactionId), let expires = purchase.latestTransaction.expiresDate else { return nil }
        return expires + state.withLock { Self.shift(originalTransactionId, $0.extensions) }
    }

    struct ExtendBody: Decodable {
        var extendByDays: Int?
        var extendReasonCode: Int?
        var requestIdentifier: String?
    }

    struct MassBody: Decodable {
        var requestIdentifier: String?
        var extendByDays: Int?
        var extendReasonCode: Int?
        var productId: String?
        var storefrontCountryCodes: [String]?
    }

    static let day: Int64 = 86_400_000

    /// How far a subscription's extensions moved its expiry, and when the last was made.
    static func shift(_ originalTransactionId: String, _ extensions: [RenewalExtensionTaken]) -> Int64 {
        extensions.reduce(0) { $0 + ($1.originalTransactionId == originalTransactionId ? Int64($1.extendByDays) * day : 0) }
    }

    /// Get Transaction History's view of the extensions: the subscription's latest transaction
    /// expires later, and moves to the end of the history (modified when last extended).
    static func applyExtensions(_ extensions: [RenewalExtensionTaken], customer: Scenario.Customer, to latest: inout [String: Scenario.TransactionVersion]) {
        guard !extensions.isEmpty else { return }
        for purchase in customer.subscriptions {
            guard let last = extensions.last(where: { $0.originalTransactionId == purchase.originalTransactionId }),
                let id = purchase.latestTransaction.transactionId, var version = latest[id]
            else { continue }
            version.transaction.expiresDate = version.transaction.expiresDate.map { $0 + shift(purchase.originalTransactionId, extensions) }
            version.modified = max(version.modified, last.at)
            latest[id] = version
        }
    }

    func subscription(_ originalTransactionId: String) -> (Scenario.Customer, Scenario.Purchase)? {
        guard let customer = scenario.customer(forTransactionId: originalTransactionId),
            let purchase = customer.subscriptions.first(where: { $0.originalTransactionId == originalTransactionId })
        else { return nil }
        return (customer, purchase)
    }

    func extendRenewalDate(originalTransactionId: String, body: [UInt8], now: Date) -> Answer {
        guard !originalTransactionId.isEmpty, originalTransactionId.allSatisfy(\.isNumber) else {
            return .error(400, 4_000_008, "Invalid request. The original transaction id parameter is invalid.")
        }
        guard let request = try? JSONDecoder().decode(ExtendBody.self, from: Data(body)) else { return .error(400, 4_000_000, "Invalid request.") }
        if let refusal = Self.refusal(days: request.extendByDays, reason: request.extendReasonCode) { return refusal }
        guard let identifier = request.requestIdentifier, !identifier.isEmpty, identifier.count <= 128 else {
            return .error(400, 4_000_011, "Invalid request. The request identifier is invalid.")
        }
        guard let (customer, purchase) = subscription(originalTransactionId) else {
            return .error(404, 4_040_005, "Original transaction id not found.")
        }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        return state.withLock { state -> Answer in
            if let earlier = state.extensions.first(where: { $0.originalTransactionId == originalTransactionId && $0.requestIdentifier == identifier }) {
                // The very request again: answered as the first was. Another request under the
                // same identifier is refused (an assumption: Apple's answer to a reused
                // identifier is not documented, endpoints-that-change §8.3).
                guard earlier.extendByDays == request.extendByDays, earlier.reasonCode == request.extendReasonCode else {
                    return .error(400, 4_000_011, "Invalid request. The request identifier was used for another request.")
                }
                return .json(Self.response(earlier))
            }
            if let refusal = refusal(purchase, extensions: state.extensions, nowMs: nowMs) { return refusal }
            let taken = extend(customer, purchase, days: request.extendByDays!, reason: request.extendReasonCode!, identifier: identifier, mass: nil, nowMs: nowMs, state: &state)
            return .json(Self.response(taken))
        }
    }

    static func response(_ taken: RenewalExtensionTaken) -> ExtendResponseBody {
        ExtendResponseBody(
            effectiveDate: taken.effectiveDate, originalTransactionId: taken.originalTransactionId, success: true, webOrderLineItemId: taken.webOrderLineItemId
        )
    }

    struct ExtendResponseBody: Encodable {
        var effectiveDate: Int64
        var originalTransactionId: String
        var success: Bool
        var webOrderLineItemId: String?
    }

    static func refusal(days: Int?, reason: Int?) -> Answer? {
        guard let days, (1...90).contains(days) else { return .error(400, 4_000_009, "Invalid request. The extend by days value is invalid.") }
        guard let reason, (0...3).contains(reason) else { return .error(400, 4_000_010, "Invalid request. The extend reason code is invalid.") }
        return nil
    }

    /// Why Apple will not extend this subscription now, or nil.
    func refusal(_ purchase: Scenario.Purchase, extensions: [RenewalExtensionTaken], nowMs: Int64) -> Answer? {
        let transaction = purchase.latestTransaction
        if transaction.inAppOwnershipType == "FAMILY_SHARED" {
            return .error(403, 4_030_007, "Subscriptions that users obtain through Family Sharing can't get a renewal date extension directly.")
        }
        if transaction.inAppOwnershipType == "ASSIGNED" {
            return .error(403, 4_030_028, "Assigned subscriptions can't get a renewal date extension.")
        }
        let expires = (transaction.expiresDate ?? 0) + Self.shift(purchase.originalTransactionId, extensions)
        if purchase.subscriptionStatus != .active || expires <= nowMs || transaction.offerDiscountType == "FREE_TRIAL" {
            return .error(403, 4_030_004, "The subscription doesn't qualify for a renewal-date extension.")
        }
        // "Only active auto-renewable subscriptions with at least one previously paid period."
        let customer = scenario.customer(forTransactionId: purchase.originalTransactionId)
        let paid = Set(
            (customer?.transactionVersions ?? []).filter {
                $0.modified <= nowMs && $0.transaction.originalTransactionId == purchase.originalTransactionId
                    && $0.transaction.offerDiscountType != "FREE_TRIAL" && ($0.transaction.price ?? 1) > 0
            }.compactMap(\.transaction.transactionId))
        if paid.isEmpty { return .error(403, 4_030_004, "The subscription doesn't qualify for a renewal-date extension.") }
        let lastYear = extensions.filter { $0.originalTransactionId == purchase.originalTransactionId && $0.at > nowMs - 365 * Self.day }
        if lastYear.count >= 2 {
            return .error(403, 4_030_005, "The subscription has reached the maximum number of renewal-date extensions.")
        }
        return nil
    }

    /// Makes the extension: the expiry moves, and Apple signs RENEWAL_EXTENDED.
    func extend(
        _ customer: Scenario.Customer, _ purchase: Scenario.Purchase, days: Int, reason: Int, identifier: String, mass: String?, nowMs: Int64,
        state: inout State
    ) -> RenewalExtensionTaken {
        let otid = purchase.originalTransactionId
        let effective = (purchase.latestTransaction.expiresDate ?? nowMs) + Self.shift(otid, state.extensions) + Int64(days) * Self.day
        let taken = RenewalExtensionTaken(
            originalTransactionId: otid, requestIdentifier: identifier, extendByDays: days, reasonCode: reason, at: nowMs, effectiveDate: effective,
            webOrderLineItemId: purchase.latestTransaction.webOrderLineItemId, mass: mass
        )
        state.extensions.append(taken)
        state.signedLater.append(notification(.renewalExtended, subtype: nil, customer, purchase, expires: effective, key: "\(otid) \(identifier)", nowMs: nowMs))
        return taken
    }

    func notification(
        _ type: NotificationType, subtype: NotificationSubtype?, _ customer: Scenario.Customer, _ purchase: Scenario.Purchase, expires: Int64, key: String,
        nowMs: Int64
    ) -> Scenario.Notification {
        var transaction = purchase.latestTransaction
        transaction.expiresDate = expires
        transaction.signedDate = nowMs
        var renewal = purchase.renewalInfo
        renewal?.signedDate = nowMs
        if renewal?.renewalDate != nil { renewal?.renewalDate = expires }
        let digest = Array(SHA256.hash(data: Data("\(type.rawValue) \(scenario.configuration.bundleId) \(scenario.configuration.environment.rawValue) \(key)".utf8)))
        var generator = SeededGenerator(seed: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        return Scenario.Notification(
            uuid: CustomerLife.Builder.uuid(&generator), type: type, subtype: subtype, signedDate: nowMs, customer: customer.index,
            originalTransactionId: purchase.originalTransactionId, transaction: transaction, renewalInfo: renewal, status: purchase.subscriptionStatus,
            sendAttempts: []
        )
    }

    // MARK: The mass extension

    func massExtend(body: [UInt8], now: Date) -> Answer {
        guard let request = try? JSONDecoder().decode(MassBody.self, from: Data(body)) else { return .error(400, 4_000_000, "Invalid request.") }
        guard let identifier = request.requestIdentifier, identifier.count <= 128, UUID(uuidString: identifier) != nil else {
            return .error(400, 4_000_011, "Invalid request. The request identifier is invalid.")
        }
        if let refusal = Self.refusal(days: request.extendByDays, reason: request.extendReasonCode) { return refusal }
        guard let productId = request.productId, scenario.customers.contains(where: { $0.subscriptions.contains { $0.latestTransaction.productId == productId } }) else {
            return .error(400, 4_000_023, "Invalid request. The product id parameter is invalid.")
        }
        if let codes = request.storefrontCountryCodes {
            guard !codes.isEmpty else { return .error(400, 4_000_027, "Invalid request. The storefront country code list is empty.") }
            guard codes.allSatisfy({ $0.count == 3 && $0.allSatisfy(\.isUppercase) }) else {
                return .error(400, 4_000_028, "Invalid request. A storefront country code is invalid.")
            }
        }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        let answer = Answer.json(MassResponseBody(requestIdentifier: identifier))
        return state.withLock { state -> Answer in
            if state.massExtensions[identifier] != nil { return answer }
            var waiting: [String] = []
            for customer in scenario.customers {
                for purchase in customer.subscriptions where purchase.latestTransaction.productId == productId && purchase.subscriptionStatus == .active {
                    if let codes = request.storefrontCountryCodes, !codes.contains(purchase.latestTransaction.storefront ?? "") { continue }
                    let expires = (purchase.latestTransaction.expiresDate ?? 0) + Self.shift(purchase.originalTransactionId, state.extensions)
                    guard expires > nowMs else { continue }
                    waiting.append(purchase.originalTransactionId)
                }
            }
            state.massExtensions[identifier] = MassExtension(
                productId: productId, requestIdentifier: identifier, days: request.extendByDays!, reason: request.extendReasonCode!, waiting: waiting,
                batch: max(1, (waiting.count + 2) / 3)
            )
            return answer
        }
    }

    /// Apple working through a mass extension: the next `batch` subscribers extended (a
    /// RENEWAL_EXTENDED each), or failed (a RENEWAL_EXTENSION/FAILURE each: Apple's rules refuse
    /// them now, or `failsInMass`).
    func advance(_ mass: inout MassExtension, nowMs: Int64, state: inout State) {
        let handled = mass.waiting.prefix(mass.batch)
        mass.waiting.removeFirst(handled.count)
        for originalTransactionId in handled {
            guard let (customer, purchase) = subscription(originalTransactionId) else { continue }
            let expires = (purchase.latestTransaction.expiresDate ?? 0) + Self.shift(originalTransactionId, state.extensions)
            if refusal(purchase, extensions: state.extensions, nowMs: nowMs) == nil, !Self.failsInMass(originalTransactionId, mass.requestIdentifier) {
                _ = extend(
                    customer, purchase, days: mass.days, reason: mass.reason, identifier: mass.requestIdentifier, mass: mass.requestIdentifier, nowMs: nowMs,
                    state: &state
                )
                mass.succeeded += 1
            } else {
                mass.failed += 1
                state.signedLater.append(
                    notification(
                        .renewalExtension, subtype: .failure, customer, purchase, expires: expires, key: "\(originalTransactionId) \(mass.requestIdentifier)", nowMs: nowMs
                    )
                )
            }
        }
    }

    struct MassResponseBody: Encodable { var requestIdentifier: String }

    /// RENEWAL_EXTENSION/SUMMARY, signed when Apple completes a mass extension.
    func summaryNotification(_ mass: MassExtension, nowMs: Int64) -> Scenario.Notification {
        let configuration = scenario.configuration
        let digest = Array(SHA256.hash(data: Data("summary \(configuration.bundleId) \(configuration.environment.rawValue) \(mass.requestIdentifier)".utf8)))
        var generator = SeededGenerator(seed: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        return Scenario.Notification(
            uuid: CustomerLife.Builder.uuid(&generator), type: .renewalExtension, subtype: .summary, signedDate: nowMs, customer: -1, originalTransactionId: "",
            transaction: TransactionPayload(), renewalInfo: nil, status: nil, sendAttempts: [],
            summary: RenewalExtensionSummary(
                environment: configuration.environment, appAppleId: configuration.environment == .production ? configuration.appAppleId : nil,
                bundleId: configuration.bundleId, productId: mass.productId, requestIdentifier: mass.requestIdentifier, succeededCount: mass.succeeded,
                failedCount: mass.failed
            )
        )
    }

    struct MassStatusBody: Encodable {
        var requestIdentifier: String
        var complete: Bool
        var completeDate: Int64?
        var succeededCount: Int64?
        var failedCount: Int64?
    }

    /// The status: Apple works through the subscribers over time, a third of them at each
    /// status request; complete (with its counts, and the SUMMARY notification signed) once every
    /// one is handled, never at the first request.
    func massExtensionStatus(productId: String, requestIdentifier: String, now: Date) -> Answer {
        guard UUID(uuidString: requestIdentifier) != nil else { return .error(400, 4_000_011, "Invalid request. The request identifier is invalid.") }
        let nowMs = Int64(now.timeIntervalSince1970 * 1000)
        return state.withLock { state -> Answer in
            guard var mass = state.massExtensions[requestIdentifier], mass.productId == productId else {
                return .error(404, 4_040_009, "The server didn't find a subscription-renewal-date extension request for this requestIdentifier and productId combination.")
            }
            mass.statusRequests += 1
            if mass.completeDate == nil { advance(&mass, nowMs: nowMs, state: &state) }
            if mass.completeDate == nil, mass.waiting.isEmpty, mass.statusRequests >= 2 {
                mass.completeDate = nowMs
                state.signedLater.append(summaryNotification(mass, nowMs: nowMs))
            }
            state.massExtensions[requestIdentifier] = mass
            guard let completeDate = mass.completeDate else { return .json(MassStatusBody(requestIdentifier: requestIdentifier, complete: false)) }
            return .json(
                MassStatusBody(requestIdentifier: requestIdentifier, complete: true, completeDate: completeDate, succeededCount: mass.succeeded, failedCount: mass.failed)
            )
        }
    }
}
