import Crypto
package import Foundation
import SignedData
import Synchronization

// Send Consumption Information, version 2, as Apple documents it (endpoints-that-change §2):
// `PUT /inApps/v2/transactions/consumption/{transactionId}`, 202 with no body, and the 400s of
// its page for what it refuses.

extension SimulatedAPI {
    /// An answer Apple took: for which transaction, what it said, and when.
    package struct ConsumptionAnswerTaken: Sendable, Hashable {
        package var transactionId: String
        package var customerConsented: Bool
        package var deliveryStatus: String
        package var sampleContentProvided: Bool
        package var consumptionPercentage: Int64?
        package var refundPreference: String?
        package var at: Date
    }

    /// Every answer Apple took, in the order they came.
    package var consumptionAnswers: [ConsumptionAnswerTaken] { state.withLock { $0.consumptionAnswers } }

    /// The body as Apple reads it: every field optional, so that a missing one is refused by
    /// its own error rather than as unreadable JSON.
    struct ConsumptionBody: Decodable {
        var customerConsented: Bool?
        var deliveryStatus: String?
        var sampleContentProvided: Bool?
        var consumptionPercentage: Int64?
        var refundPreference: String?
    }

    static let deliveryStatuses: Set<String> = ["DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER"]
    static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    func sendConsumptionInformation(transactionId: String, body: [UInt8], now: Date) -> Answer {
        guard !transactionId.isEmpty, transactionId.allSatisfy(\.isNumber) else { return .error(400, 4_000_006, "Invalid transaction id.") }
        guard let transaction = scenario.customer(forTransactionId: transactionId)?.transactionVersions.last(where: { $0.transaction.transactionId == transactionId })?.transaction
        else {
            return .error(404, 4_040_010, "Transaction id not found.")
        }
        guard let request = try? JSONDecoder().decode(ConsumptionBody.self, from: Data(body)) else {
            return .error(400, 4_000_000, "Invalid request.")
        }
        if let refusal = Self.consumptionRefusal(request, transaction: transaction) { return refusal }
        let taken = ConsumptionAnswerTaken(
            transactionId: transactionId, customerConsented: true, deliveryStatus: request.deliveryStatus ?? "",
            sampleContentProvided: request.sampleContentProvided ?? false, consumptionPercentage: request.consumptionPercentage,
            refundPreference: request.refundPreference, at: now
        )
        state.withLock { state in
            state.consumptionAnswers.append(taken)
            if let decision = decision(after: taken, transaction: transaction, signedLater: state.signedLater) { state.signedLater.append(decision) }
        }
        return Answer(status: 202, headers: [], body: [])
    }

    /// Apple's decision on a refund request once an answer arrived, as the simulator plays it:
    /// declined (REFUND_DECLINED, signed a millisecond after the answer) when the team prefers
    /// DECLINE, or says the purchase was delivered and at least half consumed; otherwise still
    /// undecided (Apple decides later, out of the simulator's sight). Only a request still open
    /// gets one: a CONSUMPTION_REQUEST of the transaction with no decision signed after it.
    func decision(after answer: ConsumptionAnswerTaken, transaction: TransactionPayload, signedLater: [Scenario.Notification]) -> Scenario.Notification? {
        let declines = answer.refundPreference == "DECLINE" || (answer.deliveryStatus == "DELIVERED" && (answer.consumptionPercentage ?? 0) >= 50_000)
        guard declines, let customer = scenario.customer(forTransactionId: answer.transactionId) else { return nil }
        let atMs = Int64(answer.at.timeIntervalSince1970 * 1000)
        // The transaction's notifications so far, without copying the world's list.
        let events = [scenario.notifications[...], signedLater[...]].joined()
            .filter { $0.customer == customer.index && $0.transaction.transactionId == answer.transactionId && $0.signedDate <= atMs }
        guard let request = events.filter({ $0.type == .consumptionRequest }).max(by: { $0.signedDate < $1.signedDate }),
            !events.contains(where: { ($0.type == .refund || $0.type == .refundDeclined) && $0.signedDate >= request.signedDate })
        else { return nil }
        var signed = transaction
        signed.signedDate = atMs + 1
        var renewal = request.renewalInfo
        renewal?.signedDate = atMs + 1
        let digest = Array(SHA256.hash(data: Data("refund-declined \(scenario.configuration.bundleId) \(answer.transactionId) \(request.uuid)".utf8)))
        var generator = SeededGenerator(seed: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
        let uuid = CustomerLife.Builder.uuid(&generator)
        return Scenario.Notification(
            uuid: uuid, type: .refundDeclined, subtype: nil, signedDate: atMs + 1, customer: customer.index,
            originalTransactionId: request.originalTransactionId, transaction: signed, renewalInfo: renewal, status: request.status, sendAttempts: []
        )
    }

    /// Apple's refusal of the answer, or nil. Where Apple's pages name no code (a percentage out
    /// of range, one not zero for an undelivered purchase, GRANT_PRORATED without one), the
    /// general 4000000 stands in: endpoints-that-change §2 and §8.1.
    static func consumptionRefusal(_ request: ConsumptionBody, transaction: TransactionPayload) -> Answer? {
        guard request.customerConsented == true else { return .error(400, 4_000_035, "Invalid request. The customer consented field is invalid.") }
        guard let status = request.deliveryStatus, deliveryStatuses.contains(status) else {
            return .error(400, 4_000_036, "Invalid request. The delivery status field is invalid.")
        }
        guard request.sampleContentProvided != nil else { return .error(400, 4_000_041, "Invalid request. The sample content provided field is invalid.") }
        if let preference = request.refundPreference, !refundPreferences.contains(preference) {
            return .error(400, 4_000_044, "Invalid request. The refund preference field is invalid.")
        }
        if transaction.inAppOwnershipType == "FAMILY_SHARED" {
            return .error(400, 4_000_185, "Invalid request. Family transactions are not supported by this endpoint.")
        }
        if transaction.inAppOwnershipType == "ASSIGNED" {
            return .error(400, 4_000_227, "Invalid request. Assigned transactions are not supported by this endpoint.")
        }
        // AdvancedCommerceTransactionNotSupportedError: Apple's pages give it no number; the general 4000000 stands in.
        if transaction.advancedCommerceInfo != nil {
            return .error(400, 4_000_000, "Invalid request. Advanced Commerce API transactions are not supported by this endpoint.")
        }
        let autoRenewable = transaction.type == .autoRenewable
        if let percentage = request.consumptionPercentage {
            if autoRenewable { return .error(400, 4_000_209, "Invalid request. Consumption percentage is not supported for auto-renewable subscriptions.") }
            guard (0...100_000).contains(percentage) else { return .error(400, 4_000_000, "Invalid request. The consumption percentage is out of range.") }
            if status != "DELIVERED", percentage != 0 { return .error(400, 4_000_000, "Invalid request. An undelivered purchase has a consumption percentage of 0.") }
        }
        if request.refundPreference == "GRANT_PRORATED", !autoRenewable {
            guard let percentage = request.consumptionPercentage, percentage > 0, percentage < 100_000 else {
                return .error(400, 4_000_000, "Invalid request. A prorated refund needs a consumption percentage between 0 and 100000.")
            }
        }
        return nil
    }

    /// How far apart Apple repeats an open refund request: developers report requests about 8
    /// hours apart before the decision (endpoints-that-change §9; Apple staff, forum thread
    /// 756151: "periodically").
    package static let consumptionRequestInterval: TimeInterval = 8 * 3600

    /// A customer asks for a refund of a transaction now: Apple's CONSUMPTION_REQUEST signed at
    /// `at`, and `repeats` more `interval` apart (8 hours unless told; each a notificationUUID of
    /// its own; not sent once an answer or a decision came before it, nor before its time), none
    /// delivered (the server was down). Returns them.
    @discardableResult
    package func requestRefund(
        transactionId: String, at: Date, repeats: Int = 0, every interval: TimeInterval = SimulatedAPI.consumptionRequestInterval, reason: String = "UNINTENDED_PURCHASE"
    ) throws -> [Scenario.Notification] {
        guard let customer = scenario.customer(forTransactionId: transactionId),
            let transaction = customer.transactionVersions.last(where: { $0.transaction.transactionId == transactionId })?.transaction
        else {
            throw SimulatorError("no transaction \(transactionId) in the world")
        }
        let latest = scenario.notifications.last { $0.customer == customer.index && $0.originalTransactionId == (transaction.originalTransactionId ?? customer.originalTransactionId) }
        let atMs = Int64(at.timeIntervalSince1970 * 1000)
        var requests = (0...repeats).map { number in
            let signedAt = atMs + Int64(number) * Int64(interval * 1000)
            var signed = transaction
            signed.signedDate = signedAt
            var renewal = latest?.renewalInfo
            renewal?.signedDate = signedAt
            let digest = Array(SHA256.hash(data: Data("refund-request \(scenario.configuration.bundleId) \(scenario.configuration.environment.rawValue) \(transactionId) \(signedAt)".utf8)))
            var generator = SeededGenerator(seed: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
            return Scenario.Notification(
                uuid: CustomerLife.Builder.uuid(&generator), type: .consumptionRequest, subtype: nil, signedDate: signedAt, customer: customer.index,
                originalTransactionId: transaction.originalTransactionId ?? customer.originalTransactionId, transaction: signed, renewalInfo: renewal, status: latest?.status, sendAttempts: []
            )
        }
        for index in requests.indices.dropFirst() { requests[index].repeatOf = requests[0].uuid }
        state.withLock { $0.signedLater += requests }
        return requests
    }
}
